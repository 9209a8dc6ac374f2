// The test behind the credential's "Test" button. A function rather than the credential's
// declarative test request: for a runner that cannot be reached, n8n reports a declarative
// test as a bare error code ("ECONNREFUSED"), and this says what to check.
import type {
	ICredentialsDecrypted,
	ICredentialTestFunctions,
	IDataObject,
	INodeCredentialTestResult,
} from 'n8n-workflow';

interface FullResponse {
	statusCode: number;
	body: unknown;
}

/**
 * testPgToolsApi (registered by every node as credentialTest pgToolsApiTest) calls GET /v1/tools with the token: it answers only from a pgtools runner and
 * only with a valid token, so one request checks the URL and the token.
 */
export async function testPgToolsApi(
	this: ICredentialTestFunctions,
	credential: ICredentialsDecrypted,
): Promise<INodeCredentialTestResult> {
	const data = credential.data ?? {};
	const url = String(data.url ?? '').trim().replace(/\/+$/, '');
	if (!/^https?:\/\/[^/]/.test(url)) {
		return { status: 'Error', message: 'The URL must start with http:// or https://, e.g. http://127.0.0.1:8080.' };
	}
	let response: FullResponse;
	try {
		// The legacy request helper is the only HTTP helper n8n gives a credential test.
		// eslint-disable-next-line @n8n/community-nodes/no-deprecated-workflow-functions
		response = (await this.helpers.request({
			uri: `${url}/v1/tools`,
			method: 'GET',
			headers: { Authorization: `Bearer ${String(data.token ?? '')}` },
			json: true,
			resolveWithFullResponse: true,
			simple: false,
			timeout: 10_000,
		})) as FullResponse;
	} catch (error) {
		const e = error as { code?: unknown; cause?: { code?: unknown } };
		const code = e.cause?.code ?? e.code;
		return {
			status: 'Error',
			message: `Cannot reach a pgtools runner at ${url}${typeof code === 'string' ? ` (${code})` : ''}. Check that pgtools serve is running there and that n8n can reach that address.`,
		};
	}
	const body = response.body as IDataObject | undefined;
	const tools = Array.isArray(body?.tools) ? body.tools : undefined;
	switch (true) {
		case response.statusCode === 200 && tools !== undefined:
			return { status: 'OK', message: `Connected to the pgtools runner: ${tools.length} tools available.` };
		case response.statusCode === 401:
			return {
				status: 'Error',
				message: 'The pgtools runner refused this token. Copy a token the runner was started with (pgtools serve --token or PGTOOLS_TOKENS).',
			};
		default:
			return {
				status: 'Error',
				message: `No pgtools runner answers at ${url} (HTTP ${response.statusCode}). Use the runner's base address without /v1, e.g. http://127.0.0.1:8080.`,
			};
	}
}
