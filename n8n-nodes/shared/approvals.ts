// The Pgtools Approval node's client: a person's review step in a workflow lists, reads and
// decides the approval requests the runner holds (GET /v1/approvals, GET and POST
// /v1/approvals/{id}), with a credential whose token has the approve scope. The runner decides
// who may approve (never the caller's own credential); the node only carries the decision, so it
// must never run as an AI Agent tool: a model would then approve its own requests.
import type {
	IDataObject,
	IExecuteFunctions,
	IHttpRequestOptions,
	IN8nHttpFullResponse,
	INodeExecutionData,
	INodeProperties,
	JsonObject,
} from 'n8n-workflow';
import { NodeApiError, NodeOperationError } from 'n8n-workflow';

import { parseJson } from './json';
import { credentialType, isToolNode } from './runner';

/** ApprovalOperation is the value of the node's Operation parameter. */
export type ApprovalOperation = 'listPending' | 'get' | 'approve' | 'deny';

/** approvalOperations lists every operation with the request it makes; an operation missing here is refused. */
export const approvalOperations: Record<ApprovalOperation, { method: 'GET' | 'POST'; byId: boolean; decision?: 'approve' | 'deny' }> = {
	listPending: { method: 'GET', byId: false },
	get: { method: 'GET', byId: true },
	approve: { method: 'POST', byId: true, decision: 'approve' },
	deny: { method: 'POST', byId: true, decision: 'deny' },
};

/** approvalIdPattern is what the runner's approval ids look like (apr_ and hex); anything else never reaches the URL. */
export const approvalIdPattern = /^apr_[0-9A-Za-z]{1,128}$/;

/** approvalProperties are the node's parameters: the operation, and the approval id for all but List Pending. */
export const approvalProperties: INodeProperties[] = [
	{
		displayName:
			'Use a Pgtools API credential whose token has the approve scope and belongs to a person, not to the agent: the runner refuses a decision from the credential that made the request.',
		name: 'approverNotice',
		type: 'notice',
		default: '',
	},
	{
		displayName: 'Operation',
		name: 'operation',
		type: 'options',
		noDataExpression: true,
		options: [
			{ name: 'Approve', value: 'approve', description: 'Approve a pending request: the caller may then re-run the call once with approval_id', action: 'Approve a request' },
			{ name: 'Deny', value: 'deny', description: 'Deny a pending request: a re-call with its approval_id is refused', action: 'Deny a request' },
			{ name: 'Get', value: 'get', description: 'Get one request: who asked, the tool, its arguments, the measured effect, its status', action: 'Get a request' },
			{ name: 'List Pending', value: 'listPending', description: 'List the pending requests this token may decide, oldest first, one item each', action: 'List pending requests' },
		],
		default: 'listPending',
	},
	{
		displayName: 'Approval ID',
		name: 'approvalId',
		type: 'string',
		default: '',
		required: true,
		placeholder: 'apr_6f1c…',
		description: 'The request\'s ID (apr_…), e.g. {{ $json.id }} after List Pending, or the approval.id of an approval_required answer',
		displayOptions: { show: { operation: ['get', 'approve', 'deny'] } },
	},
];

/**
 * executeApproval runs the node: one request per input item. List Pending outputs one item per
 * pending request; the others output the request the runner answers with (after a decision, with
 * its new status), unwrapped from the answer's "approval". An error answer of the runner (a token without the approve scope, the caller's
 * own request, one already decided or expired) fails the node with the runner's words, or is the
 * item with "continue on fail", so a workflow can route it.
 */
export async function executeApproval(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
	const node = this.getNode();
	if (isToolNode(node)) {
		throw new NodeOperationError(node, 'The Pgtools Approval node cannot run as an AI Agent tool', {
			description: 'A model must not decide its own approval requests. Use the node in a workflow step a person drives (a form, a chat reply, a Wait node).',
		});
	}
	const credentials = await this.getCredentials(credentialType);
	const baseUrl = String(credentials.url ?? '').replace(/\/+$/, '');
	const items = this.getInputData();
	const out: INodeExecutionData[] = [];
	for (let itemIndex = 0; itemIndex < items.length; itemIndex++) {
		try {
			const operation = this.getNodeParameter('operation', itemIndex) as string;
			const answers = await approvalRequest.call(this, baseUrl, operation, itemIndex);
			for (const json of answers) out.push({ json, pairedItem: { item: itemIndex } });
		} catch (error) {
			if (!this.continueOnFail()) {
				throw error instanceof NodeApiError || error instanceof NodeOperationError ? error : new NodeOperationError(node, error as Error, { itemIndex });
			}
			const answer = (error as { runnerAnswer?: IDataObject }).runnerAnswer;
			out.push({ json: answer ?? { error: (error as Error).message }, pairedItem: { item: itemIndex } });
		}
	}
	return [out];
}

// approvalRequest makes one operation's request and returns its items.
async function approvalRequest(this: IExecuteFunctions, baseUrl: string, operation: string, itemIndex: number): Promise<IDataObject[]> {
	const node = this.getNode();
	const op = Object.prototype.hasOwnProperty.call(approvalOperations, operation) ? approvalOperations[operation as ApprovalOperation] : undefined;
	if (!op) {
		throw new NodeOperationError(node, `Unknown operation ${JSON.stringify(operation)}`, {
			description: 'Pick List Pending, Get, Approve or Deny.',
			itemIndex,
		});
	}
	if (!/^https?:\/\//.test(baseUrl)) {
		throw new NodeOperationError(node, `The pgtools API credential has no valid URL ("${baseUrl}")`, {
			description: "Set URL to the runner's address, e.g. http://127.0.0.1:8080.",
			itemIndex,
		});
	}
	let url = `${baseUrl}/v1/approvals`;
	if (op.byId) {
		const id = String(this.getNodeParameter('approvalId', itemIndex, '') ?? '').trim();
		if (!approvalIdPattern.test(id)) {
			throw new NodeOperationError(node, `Approval ID ${JSON.stringify(id.slice(0, 80))} is not an approval request's ID`, {
				description: 'Give the id of a request, apr_ followed by letters and digits: the id of a List Pending item, or the approval.id of an approval_required answer.',
				itemIndex,
			});
		}
		url += `/${id}`;
	}
	const options: IHttpRequestOptions = {
		method: op.method,
		url,
		headers: { Accept: 'application/json', ...(op.decision && { 'Content-Type': 'application/json' }) },
		encoding: 'text',
		ignoreHttpStatusErrors: true,
		returnFullResponse: true,
	};
	if (op.decision) options.body = JSON.stringify({ decision: op.decision });
	let response: IN8nHttpFullResponse;
	try {
		response = (await this.helpers.httpRequestWithAuthentication.call(this, credentialType, options)) as IN8nHttpFullResponse;
	} catch (error) {
		const code = (error as { cause?: { code?: unknown }; code?: unknown })?.cause?.code ?? (error as { code?: unknown })?.code;
		const fix = 'Check that pgtools serve is running and that the URL in the pgtools API credential is its address, e.g. http://127.0.0.1:8080.';
		const e = new NodeOperationError(node, 'Cannot reach the pgtools runner', { description: fix, itemIndex });
		e.message = `Cannot reach the pgtools runner at ${baseUrl}${typeof code === 'string' ? ` (${code})` : ''}. ${fix}`;
		throw e;
	}
	const body = readAnswer(response.body);
	if (isRunnerError(body)) {
		const description = [body.errorType, body.suggestion].filter(Boolean).join(': ');
		const error = new NodeApiError(node, body as JsonObject, {
			message: String(body.error ?? 'The pgtools runner refused the request'),
			description,
			httpCode: String(response.statusCode),
			itemIndex,
		});
		// With "continue on fail" the runner's error object is the item, as the tool nodes do.
		Object.defineProperty(error, 'runnerAnswer', { value: body });
		throw error;
	}
	const items = operation === 'listPending' ? approvalList(body) : oneApproval(body);
	if (response.statusCode >= 400 || items === undefined) {
		throw new NodeApiError(node, { status: response.statusCode } as JsonObject, {
			message: `The server at ${baseUrl} answered HTTP ${response.statusCode} without a pgtools approval`,
			description:
				"Check that the URL in the pgtools API credential is the runner's base address (without /v1), e.g. http://127.0.0.1:8080, and that the runner is a pgtools with approvals (GET /v1/approvals).",
			httpCode: String(response.statusCode),
			itemIndex,
		});
	}
	return items.map(withArgumentsText);
}

/**
 * withArgumentsText adds argumentsText, the request's arguments as indented JSON text. n8n's
 * expressions refuse to read a field named arguments ("Cannot access "arguments" due to security
 * concerns"), so a form, a message or an If node that shows or checks the arguments reads this
 * text instead. A number JavaScript cannot hold exactly is in it as a string of its digits.
 */
export function withArgumentsText(approval: IDataObject): IDataObject {
	return { ...approval, argumentsText: JSON.stringify(approval.arguments ?? {}, null, 2) };
}

// readAnswer parses the runner's JSON text without rounding a number: the approver reads the
// caller's arguments, and 9007199254740993 must not read as a neighbouring id.
function readAnswer(body: unknown): unknown {
	if (typeof body !== 'string' && !Buffer.isBuffer(body)) return body;
	try {
		return parseJson(body.toString());
	} catch {
		return undefined;
	}
}

function isObject(value: unknown): value is IDataObject {
	return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** isRunnerError reports whether an answer is the runner's error object (success false, with errorType). */
export function isRunnerError(value: unknown): value is IDataObject & { errorType: string } {
	return isObject(value) && value.success === false && typeof value.errorType === 'string';
}

/** isApproval reports whether an answer is one approval request (it has an apr_ id and a status). */
export function isApproval(value: unknown): value is IDataObject {
	return isObject(value) && typeof value.id === 'string' && approvalIdPattern.test(value.id) && typeof value.status === 'string';
}

// approvalList reads GET /v1/approvals: {"success": true, "approvals": [...]} (or a bare list);
// undefined when the answer is neither, or holds anything but approvals.
function approvalList(value: unknown): IDataObject[] | undefined {
	const list = Array.isArray(value) ? value : isObject(value) && value.success === true && Array.isArray(value.approvals) ? value.approvals : undefined;
	if (!list || !list.every(isApproval)) return undefined;
	return list as IDataObject[];
}

// oneApproval reads GET and POST /v1/approvals/{id}: {"success": true, "approval": {...}} (or the
// bare request), as the one item whose fields a workflow reads ($json.id, $json.status).
function oneApproval(value: unknown): IDataObject[] | undefined {
	const approval = isObject(value) && value.success === true ? value.approval : value;
	return isApproval(approval) ? [approval] : undefined;
}
