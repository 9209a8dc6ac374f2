import type {
	IAuthenticateGeneric,
	Icon,
	ICredentialType,
	INodeProperties,
} from 'n8n-workflow';

/** PgToolsApi is the "pgtools API" credential: where the runner listens and the token it accepts. */
export class PgToolsApi implements ICredentialType {
	name = 'pgToolsApi';

	displayName = 'pgtools API';

	icon: Icon = { light: 'file:../icons/pgtools.svg', dark: 'file:../icons/pgtools.dark.svg' };

	documentationUrl = 'https://github.com/pgtools/pgtools#n8n';

	properties: INodeProperties[] = [
		{
			displayName: 'URL',
			name: 'url',
			type: 'string',
			default: 'http://127.0.0.1:8080',
			required: true,
			placeholder: 'http://pgtools:8080',
			description: 'Base address of the pgtools runner (pgtools serve --listen), without /v1',
		},
		{
			displayName: 'Token',
			name: 'token',
			type: 'string',
			typeOptions: { password: true },
			default: '',
			required: true,
			description: 'One of the runner\'s API tokens (pgtools serve --token or PGTOOLS_TOKENS); its scopes limit what the tools may do',
		},
	];

	authenticate: IAuthenticateGeneric = {
		type: 'generic',
		properties: {
			headers: {
				Authorization: '=Bearer {{$credentials.token}}',
			},
		},
	};

	// No declarative test request: every node names a test function (testedBy), which reports an
	// unreachable runner in plain words (see shared/credentialTest.ts).
}
