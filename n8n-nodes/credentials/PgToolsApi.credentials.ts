import type {
	IAuthenticateGeneric,
	Icon,
	ICredentialTestRequest,
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

	// GET /v1/tools needs a valid token and answers only from a pgtools runner, so it checks
	// the URL and the token at once.
	test: ICredentialTestRequest = {
		request: {
			baseURL: '={{$credentials.url}}',
			url: '/v1/tools',
			method: 'GET',
		},
		rules: [
			{
				type: 'responseCode',
				properties: {
					value: 401,
					message: 'The pgtools runner refused this token. Copy a token the runner was started with (pgtools serve --token or PGTOOLS_TOKENS).',
				},
			},
			{
				type: 'responseCode',
				properties: {
					value: 404,
					message: 'No pgtools runner answers at this URL. Use the runner\'s base address without /v1, e.g. http://127.0.0.1:8080.',
				},
			},
		],
	};
}
