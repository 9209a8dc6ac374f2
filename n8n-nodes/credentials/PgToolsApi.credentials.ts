import type {
	IAuthenticateGeneric,
	Icon,
	ICredentialTestRequest,
	ICredentialType,
	INodeProperties,
} from 'n8n-workflow';

/** PgToolsApi is the "Pgtools API" credential: where the runner listens and the token it accepts. */
export class PgToolsApi implements ICredentialType {
	name = 'pgToolsApi';

	// Title case, as n8n's credential lint (run by its verification scanner) requires.
	displayName = 'Pgtools API';

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

	// A declarative test: a test function would need the legacy request helper (the only one n8n
	// gives it), which n8n's verification scanner refuses. GET /v1/tools answers only a pgtools
	// runner and only with a valid token, so one request checks the URL and the token; the rules
	// turn the answers a wrong setting gets into the fix. An unreachable runner is reported by n8n
	// itself, as the bare error code (ECONNREFUSED, ENOTFOUND).
	test: ICredentialTestRequest = {
		request: {
			baseURL: '={{ String($credentials.url).replace(/\\/+$/, "") }}',
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
					message: "No pgtools runner answers at this URL (HTTP 404). Use the runner's base address without /v1, e.g. http://127.0.0.1:8080.",
				},
			},
		],
	};
}
