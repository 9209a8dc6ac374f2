// "Act as User": the end user a node's calls are for, set by the workflow's builder (docs/design.md §11).
// The runner then runs the call as "<token>:<user>" with the token's role and the claims
// {"sub": user, "via": token}, so PostgreSQL's row-level security decides what the model's calls
// may touch. The value comes from the workflow (an expression over the trigger's item, such as
// the chat's session id), never from the model: n8n offers the model every $fromAI() call found
// in any node parameter, so a $fromAI() here would let the model choose whom it acts for, and
// the node refuses one.
import type { IExecuteFunctions, INodeProperties } from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';

/** actAsHeader names the end user on the HTTP API (runner.ActAsHeader). */
export const actAsHeader = 'X-PgTools-Act-As';

/** actAsParam is the node parameter holding the end user; empty means the token's own principal. */
export const actAsParam = 'actAsUser';

/**
 * actAsProperty is the node's "Act as User" field. It lives on the node, not on the credential:
 * like the Session ID of n8n's memory nodes (default {{ $json.sessionId }}), whom a call is for
 * changes with every execution and item, which node parameters evaluate per item, while a
 * credential is one fixed secret shared by every workflow that picks it.
 */
export const actAsProperty: INodeProperties = {
	displayName: 'Act as User',
	name: actAsParam,
	type: 'string',
	default: '',
	placeholder: 'e.g. {{ $json.sessionId }}',
	description:
		'The end user these calls are for, usually an expression such as {{ $json.sessionId }} or the chat user\'s ID. pgtools runs them as that user (row-level security on the claim sub decides which rows), with the token\'s act_as permission, or serve --n8n-act-as for the task runner. Never a $fromAI() value: the model must not choose whom it acts for. Empty: the token\'s own identity.',
};

/**
 * actAsSubject is the end user of one item's call: the parameter's value trimmed, or undefined
 * when it is empty. A parameter holding $fromAI() fails the node before any call, since n8n would
 * have offered it to the model as a tool argument; a value that cannot be a user ID (an object,
 * a control character) fails it with the fix, without repeating the value. Its
 * length is the runner's to check.
 */
export function actAsSubject(this: IExecuteFunctions, itemIndex: number): string | undefined {
	const raw = this.getNode().parameters?.[actAsParam];
	if (typeof raw === 'string' && raw.includes('$fromAI')) {
		throw new NodeOperationError(this.getNode(), 'Act as User must not use $fromAI()', {
			description:
				'The model would choose whom the calls act for. Set Act as User to an expression over the workflow\'s data, e.g. {{ $json.sessionId }}, or leave it empty.',
			itemIndex,
		});
	}
	const value = this.getNodeParameter(actAsParam, itemIndex, '') as unknown;
	if (value === undefined || value === null) return undefined;
	if (typeof value !== 'string' && typeof value !== 'number') {
		const kind = Array.isArray(value) ? 'a list' : typeof value === 'object' ? 'an object' : `a ${typeof value}`;
		throw invalid(this, `Act as User gives ${kind}, not a user ID`, itemIndex);
	}
	const subject = String(value).trim();
	if (subject === '') return undefined;
	// The runner refuses control characters too, but on HTTP Node would refuse the header first
	// with an error that reads like an unreachable runner.
	// eslint-disable-next-line no-control-regex
	if (/[\u0000-\u001f\u007f-\u009f]/.test(subject)) {
		throw invalid(this, 'Act as User holds a control character (a line break?)', itemIndex);
	}
	return subject;
}

function invalid(ctx: IExecuteFunctions, message: string, itemIndex: number): NodeOperationError {
	return new NodeOperationError(ctx.getNode(), message, {
		description: 'Set Act as User to an expression that gives the end user\'s ID as text, e.g. {{ $json.sessionId }}.',
		itemIndex,
	});
}
