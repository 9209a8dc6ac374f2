// The runner client shared by every node: arguments from node parameters, one tool call per
// input item — POST /v1/tools/{tool}, or a task on n8n's task broker — and the runner's JSON
// answer as the item. A node is thin on purpose: validation, safety and the wording of errors
// live in the runner.
import type {
	IDataObject,
	IExecuteFunctions,
	IHttpRequestOptions,
	IN8nHttpFullResponse,
	INode,
	INodeExecutionData,
	JsonObject,
} from 'n8n-workflow';
import { NodeApiError, NodeOperationError } from 'n8n-workflow';

import { actAsHeader, actAsSubject } from './actAs';
import { brokerCommand, type Connection, taskType } from './connection';
import { inexactNumbers, jsonObjectText, parseJson, RawJson } from './json';
import { isOmitted, type ToolArg, unsetValue } from './properties';

/** credentialType is the name of the "pgtools API" credential. */
export const credentialType = 'pgToolsApi';

/** sessionHeader carries the session id too, so a load balancer can route a session to the replica that holds it. */
export const sessionHeader = 'X-PgTools-Session';

/** maxResponseBytesHeader asks the runner to cut the rows of one answer at that many bytes (it can only lower the database's cap). */
export const maxResponseBytesHeader = 'X-PgTools-Max-Response-Bytes';

/** responseSizeParam is the tool node option holding the byte budget of one answer (see responseSizeProperty). */
export const responseSizeParam = 'responseSizeLimit';

/** The plan budget headers: a statement planned above them is refused before it runs (they can only lower the runner's budget). */
export const maxEstimatedCostHeader = 'X-PgTools-Max-Estimated-Cost';
export const maxEstimatedRowsHeader = 'X-PgTools-Max-Estimated-Rows';

/** PlanBudget is a tool node's Max Estimated Cost and Max Estimated Rows options; 0 leaves a bound to the runner. */
export interface PlanBudget {
	cost: number;
	rows: number;
}

/** rowFormatParam is the tool node option choosing the row format of answers ("" leaves it to the runner). */
export const rowFormatParam = 'rowFormat';

/** ToolDefinition is what a node forwards: the tool's wire name (a built-in's, or an operator-defined tool's) and its arguments. */
export interface ToolDefinition {
	tool: string;
	args: readonly ToolArg[];
	/** formats: the tool takes a format argument (objects, columns, csv), set from the Row Format option. */
	formats?: boolean;
}

/** RunnerResult is a tool answer: the runner's JSON object (success true, or an error with errorType and suggestion). */
export type RunnerResult = IDataObject & { success: boolean };

/**
 * Body is a call's arguments in order. A JSON argument the model gave as text stays RawJson, so
 * its numbers reach the runner as written (see json.ts).
 */
export type Body = Record<string, unknown>;

/** BuiltArguments is a request body, or an answer in the runner's error shape when a value cannot be sent. */
export type BuiltArguments = { body: Body } | { invalid: RunnerResult };

/** Answer is the runner's answer: parsed without losing a number, and its JSON text as received. */
export interface Answer {
	result: RunnerResult;
	text: string;
}

/**
 * buildArguments turns parameter values into a request body, forwarding every value the model
 * or the builder gave as given, including values equal to a schema default (an explicit limit of
 * 1000 reaches the runner as 1000): the runner validates them and applies its own configured
 * defaults to what is left out. Left out are only the values that mean "not given": no value,
 * an empty string, and the $fromAI default of an optional argument (see unsetValue). Two checks
 * must happen here because the runner never sees the value as n8n holds it: a JSON argument
 * given as text is parsed (it is forwarded as that text, so it must be JSON), and one given as a
 * value n8n already parsed is refused when it holds a number JavaScript may have rounded. Either
 * problem becomes an invalid_arguments answer in the runner's shape.
 */
export function buildArguments(args: readonly ToolArg[], value: (param: string) => unknown): BuiltArguments {
	const body: Body = {};
	const problems: string[] = [];
	let rounded = false;
	for (const arg of args) {
		const normalized = normalize(arg, value(arg.param));
		if ('problem' in normalized) {
			problems.push(normalized.problem);
			rounded ||= normalized.rounded === true;
		} else if (normalized.value !== undefined) body[arg.key] = normalized.value;
	}
	return problems.length > 0 ? { invalid: invalidArguments(problems, rounded) } : { body };
}

/** invalidArguments is the runner-shaped answer for arguments the node cannot send; rounded: a problem is a number JavaScript may have rounded. */
export function invalidArguments(problems: readonly string[], rounded: boolean): RunnerResult {
	return {
		success: false,
		error: `Invalid arguments: ${problems.join('; ')}`,
		errorType: 'invalid_arguments',
		suggestion: rounded
			? 'Write each such number as a JSON string, e.g. {"id": "9007199254740993"} (PostgreSQL converts it to the column\'s type), or send the whole argument as a string holding its JSON text, e.g. row: "{\\"id\\": 9007199254740993}".'
			: 'Send the argument named in error as valid JSON of the kind its description shows, e.g. row: {"name": "Ann"}, params: [42].',
	};
}

/** roundedProblem names the values at paths that hold a number JavaScript may have rounded. */
export function roundedProblem(paths: readonly string[]): string {
	return `${paths.join(', ')}: a number JavaScript cannot hold exactly (past ±2^53, or more than 15 significant digits), so it may have been rounded before it reached pgtools`;
}

type Normalized = { value?: unknown } | { problem: string; rounded?: boolean };

function normalize(arg: ToolArg, raw: unknown): Normalized {
	if (raw === undefined || raw === null || raw === unsetValue(arg)) return {};
	if (typeof raw === 'string' && raw.trim() === '') return {};
	if (arg.kind === 'json') return normalizeJson(arg, raw);
	// n8n hands a boolean parameter set by an expression over as text.
	if (arg.kind === 'boolean' && (raw === 'true' || raw === 'false')) return raw === 'true' ? { value: true } : {};
	return { value: raw };
}

// normalizeJson forwards a JSON argument. Text is parsed only to check it (parseJson keeps every
// number) and is sent as written; a value n8n already parsed is sent unless it holds a number
// that may have been rounded on the way. Its shape is the runner's to judge.
function normalizeJson(arg: ToolArg, raw: unknown): Normalized {
	if (typeof raw !== 'string') {
		if (isOmitted(raw)) return {};
		const inexact = inexactNumbers(raw, arg.key);
		if (inexact.length === 0) return { value: raw };
		return { problem: roundedProblem(inexact), rounded: true };
	}
	const text = raw.trim();
	let parsed: unknown;
	try {
		parsed = parseJson(text);
	} catch (error) {
		return { problem: `${arg.key} is not valid JSON (${(error as Error).message})` };
	}
	return isOmitted(parsed) ? {} : { value: new RawJson(text) };
}

/** rowFormat is the Row Format option of a tool node for this item: "" leaves the format to the runner's default. */
function rowFormat(this: IExecuteFunctions, asTool: boolean, itemIndex: number): string {
	if (!asTool) return '';
	const f = String(this.getNodeParameter(rowFormatParam, itemIndex, '') ?? '');
	return ['objects', 'columns', 'csv'].includes(f) ? f : '';
}

/** responseSizeLimit is the byte budget of one answer for this item: the tool option, 0 for none (a workflow node has none). */
function responseSizeLimit(this: IExecuteFunctions, asTool: boolean, itemIndex: number): number {
	if (!asTool) return 0;
	const n = Number(this.getNodeParameter(responseSizeParam, itemIndex, 0));
	return Number.isInteger(n) && n > 0 ? n : 0;
}

/** planBudget is the plan budget of this item: the tool options, zeros for none (a workflow node has none). */
function planBudget(this: IExecuteFunctions, asTool: boolean, itemIndex: number): PlanBudget {
	if (!asTool) return { cost: 0, rows: 0 };
	const cost = Number(this.getNodeParameter('maxEstimatedCost', itemIndex, 0));
	const rows = Number(this.getNodeParameter('maxEstimatedRows', itemIndex, 0));
	return { cost: Number.isFinite(cost) && cost > 0 ? cost : 0, rows: Number.isInteger(rows) && rows > 0 ? rows : 0 };
}

/** isToolNode reports whether the node runs as an AI Agent tool (n8n's generated <name>Tool type). */
export function isToolNode(node: INode): boolean {
	return node.type.endsWith('Tool');
}

/** ArgumentsOf gives one item's request body; by default the node's parameters (buildArguments). */
export type ArgumentsOf = (itemIndex: number) => BuiltArguments;

/**
 * executeTool runs a node: one tool call per input item. An error answer from the runner fails
 * the run, as n8n's own tool nodes do, so it shows as failed in the editor. As a tool, the
 * error's message is the runner's whole error object as JSON text: n8n hands the model only the
 * message of a failed tool run, and the model must read errorType and suggestion to fix its next
 * call. With "continue on fail" the error object is the item instead. A runner that cannot be
 * reached or does not answer like pgtools fails the node with the fix in the message.
 */
export async function executeTool(
	this: IExecuteFunctions,
	definition: ToolDefinition,
	argumentsOf?: ArgumentsOf,
): Promise<INodeExecutionData[][]> {
	const items = this.getInputData();
	const send = await sender.call(this, definition.tool);
	const asTool = isToolNode(this.getNode());
	const returnData: INodeExecutionData[] = [];
	for (let itemIndex = 0; itemIndex < items.length; itemIndex++) {
		let answer: Answer;
		try {
			const built = argumentsOf
				? argumentsOf(itemIndex)
				: buildArguments(definition.args, (param) => this.getNodeParameter(param, itemIndex, undefined));
			const subject = actAsSubject.call(this, itemIndex);
			const format = definition.formats ? rowFormat.call(this, asTool, itemIndex) : '';
			if (format && 'body' in built) built.body.format = format;
			answer =
				'invalid' in built
					? { result: built.invalid, text: JSON.stringify(built.invalid) }
					: await send(built.body, itemIndex, responseSizeLimit.call(this, asTool, itemIndex), subject, planBudget.call(this, asTool, itemIndex));
		} catch (error) {
			if (this.continueOnFail()) {
				returnData.push({ json: { error: (error as Error).message }, pairedItem: { item: itemIndex } });
				continue;
			}
			throw error instanceof NodeApiError || error instanceof NodeOperationError
				? error
				: new NodeOperationError(this.getNode(), error as Error, { itemIndex });
		}
		const { result } = answer;
		if (result.success === false && !this.continueOnFail()) {
			const description = [result.errorType, result.suggestion].filter(Boolean).join(': ');
			if (asTool) throw withMessage(new NodeOperationError(this.getNode(), 'pgtools error', { description, itemIndex }), answer.text);
			throw new NodeApiError(this.getNode(), result as JsonObject, {
				message: String(result.error ?? 'The pgtools runner reported an error'),
				description,
				itemIndex,
			});
		}
		returnData.push({ json: result, pairedItem: { item: itemIndex } });
	}
	return [returnData];
}

// withMessage sets an error's message after n8n's constructor, which replaces any message that
// merely mentions a system error code (ECONNREFUSED, EPERM, …) with a generic sentence that
// says nothing of what to fix.
function withMessage<E extends Error>(error: E, message: string): E {
	error.message = message;
	return error;
}

type Send = (body: Body, itemIndex: number, maxResponseBytes: number, subject: string | undefined, budget?: PlanBudget) => Promise<Answer>;

// sender picks the transport the node's Connection names. Only the HTTP connection reads the
// credential: with the task runner the node has none.
async function sender(this: IExecuteFunctions, tool: string): Promise<Send> {
	const connection = this.getNodeParameter('connection', 0, 'http') as Connection;
	if (connection === 'taskRunner') {
		return async (body, itemIndex, max, subject, budget) => await callTaskRunner.call(this, tool, body, itemIndex, max, subject, budget);
	}
	const credentials = await this.getCredentials(credentialType);
	const baseUrl = String(credentials.url ?? '').replace(/\/+$/, '');
	return async (body, itemIndex, max, subject, budget) => await callRunner.call(this, baseUrl, tool, body, itemIndex, max, subject, budget);
}

/**
 * callRunner posts one tool call and returns the runner's answer, success or error. The body
 * goes as JSON text (model's JSON arguments as written) and the answer is read as text, so no
 * number passes through a JavaScript number on the way. A subject (Act as User) goes as the
 * header X-PgTools-Act-As; without one the header is absent, since the runner refuses an act-as
 * header from a token that may not act for others even when it is empty.
 */
export async function callRunner(
	this: IExecuteFunctions,
	baseUrl: string,
	tool: string,
	body: Body,
	itemIndex: number,
	maxResponseBytes = 0,
	subject?: string,
	budget?: PlanBudget,
): Promise<Answer> {
	if (!/^https?:\/\//.test(baseUrl)) {
		throw new NodeOperationError(
			this.getNode(),
			`The pgtools API credential has no valid URL ("${baseUrl}")`,
			{ description: 'Set URL to the runner\'s address, e.g. http://127.0.0.1:8080.', itemIndex },
		);
	}
	const headers: IDataObject = { 'Content-Type': 'application/json', Accept: 'application/json' };
	if (typeof body.session_id === 'string') headers[sessionHeader] = body.session_id;
	if (maxResponseBytes > 0) headers[maxResponseBytesHeader] = String(maxResponseBytes);
	if (budget && budget.cost > 0) headers[maxEstimatedCostHeader] = String(budget.cost);
	if (budget && budget.rows > 0) headers[maxEstimatedRowsHeader] = String(budget.rows);
	if (subject !== undefined) {
		// An HTTP header carries ASCII only: Node refuses other characters or sends them as
		// Latin-1 bytes, which would name a different user.
		if (!/^[\x20-\x7e]+$/.test(subject)) {
			throw new NodeOperationError(this.getNode(), 'Act as User holds characters an HTTP header cannot carry', {
				description:
					'Use an ASCII user ID (e.g. the chat\'s session id or a numeric id), or set Connection to n8n Task Runner, which takes any text.',
				itemIndex,
			});
		}
		headers[actAsHeader] = subject;
	}
	const options: IHttpRequestOptions = {
		method: 'POST',
		url: `${baseUrl}/v1/tools/${tool}`,
		body: jsonObjectText(Object.entries(body)),
		headers,
		encoding: 'text',
		ignoreHttpStatusErrors: true,
		returnFullResponse: true,
	};
	let response: IN8nHttpFullResponse;
	try {
		response = (await this.helpers.httpRequestWithAuthentication.call(
			this,
			credentialType,
			options,
		)) as IN8nHttpFullResponse;
	} catch (error) {
		const code = errorCode(error);
		// The fix goes in the message: it is all n8n passes to the model of a failed tool run.
		const fix = 'Check that pgtools serve is running and that the URL in the pgtools API credential is its address, e.g. http://127.0.0.1:8080.';
		const e = new NodeOperationError(this.getNode(), 'Cannot reach the pgtools runner', { description: fix, itemIndex });
		throw withMessage(e, `Cannot reach the pgtools runner at ${baseUrl}${code ? ` (${code})` : ''}. ${fix}`);
	}
	const answer = parseAnswer(response.body);
	if (answer === undefined) {
		throw new NodeApiError(this.getNode(), { status: response.statusCode } as JsonObject, {
			message: `The server at ${baseUrl} answered HTTP ${response.statusCode} without a pgtools result`,
			description:
				'Check that the URL in the pgtools API credential is the runner\'s base address (without /v1), e.g. http://127.0.0.1:8080.',
			httpCode: String(response.statusCode),
			itemIndex,
		});
	}
	return answer;
}

/**
 * callTaskRunner runs one tool call as a task of type pgtools on n8n's task broker, served by
 * `pgtools serve --n8n-broker`, and returns the runner's answer, success or error: the same
 * JSON as over HTTP (the runner sends a failed call as the task's error, with errorType). The
 * arguments go as JSON text and text_result asks for the answer as text too, because n8n parses
 * task messages with JavaScript. n8n's own failures fail the node: no pgtools runner connected
 * (startJob throws once N8N_RUNNERS_TASK_REQUEST_TIMEOUT has passed), or the task ended without
 * an answer (the runner disconnected, the task timed out or was cancelled), which come as
 * errors without errorType. A subject (Act as User) is the task setting subject, absent without one.
 */
export async function callTaskRunner(
	this: IExecuteFunctions,
	tool: string,
	body: Body,
	itemIndex: number,
	maxResponseBytes = 0,
	subject?: string,
	budget?: PlanBudget,
): Promise<Answer> {
	const node = this.getNode();
	if (typeof this.startJob !== 'function') {
		throw new NodeOperationError(node, 'This n8n cannot send tasks to task runners', {
			description:
				'The n8n task runner connection needs a self-hosted n8n with task runners (tested with 2.41.1). Set Connection to Runner HTTP API and pick a pgtools API credential instead.',
			itemIndex,
		});
	}
	// The settings pgtools expects: the tool's wire name, its arguments, and the database apart.
	const { database, ...args } = body;
	const settings: IDataObject = { tool, args: jsonObjectText(Object.entries(args)), text_result: true };
	if (typeof database === 'string') settings.database = database;
	if (maxResponseBytes > 0) settings.max_response_bytes = maxResponseBytes;
	if (budget && budget.cost > 0) settings.max_estimated_cost = budget.cost;
	if (budget && budget.rows > 0) settings.max_estimated_rows = budget.rows;
	if (subject !== undefined) settings.subject = subject;
	let outcome: Awaited<ReturnType<IExecuteFunctions['startJob']>>;
	try {
		outcome = await this.startJob(taskType, settings, itemIndex);
	} catch (error) {
		throw noTaskRunner(node, error, itemIndex);
	}
	if (outcome.ok) {
		const answer = parseAnswer(outcome.result);
		if (answer !== undefined) return answer;
		throw new NodeOperationError(node, 'The task runner of type pgtools answered without a pgtools result', {
			description: 'Only pgtools serve --n8n-broker should register for the task type pgtools with n8n.',
			itemIndex,
		});
	}
	const answer = parseAnswer(outcome.error);
	if (answer !== undefined && typeof answer.result.errorType === 'string') return answer;
	const reason = (outcome.error as { message?: unknown } | undefined)?.message;
	throw new NodeOperationError(
		node,
		`The pgtools task runner did not finish the call: ${typeof reason === 'string' ? reason : String(outcome.error)}`,
		{
			description:
				'n8n reported this, not pgtools: the runner disconnected, or the task ran past N8N_RUNNERS_TASK_TIMEOUT or was cancelled. The pgtools serve log tells more. A write may or may not have been committed: check before repeating it.',
			itemIndex,
		},
	);
}

// noTaskRunner explains a task n8n could not hand to a pgtools runner. startJob throws n8n's
// TaskRequestTimeoutError when no runner of the type took the task in time, which (with
// nothing else registering for pgtools) means none is connected.
function noTaskRunner(node: INode, error: unknown, itemIndex: number): NodeOperationError {
	const e = error as { message?: unknown; extra?: { elapsedSeconds?: unknown } } | undefined;
	const timedOut = (error as object | undefined)?.constructor?.name === 'TaskRequestTimeoutError';
	const waited = typeof e?.extra?.elapsedSeconds === 'number' ? ` (waited ${e.extra.elapsedSeconds} s)` : '';
	const what = timedOut
		? `No pgtools task runner is connected to n8n${waited}`
		: `n8n could not hand the call to a pgtools task runner (${typeof e?.message === 'string' ? e.message : String(error)})`;
	const message = `${what}. Start one beside n8n: ${brokerCommand}, with N8N_RUNNERS_AUTH_TOKEN set to the value n8n runs with.`;
	const failure = new NodeOperationError(
		node,
		message,
		{
			description:
				'n8n waits N8N_RUNNERS_TASK_REQUEST_TIMEOUT seconds (60 by default) for a runner of task type pgtools. n8n must run with N8N_RUNNERS_AUTH_TOKEN set, and pgtools must reach n8n\'s task broker (port 5679, N8N_RUNNERS_BROKER_PORT); pgtools logs "registered with the n8n task broker" once it has. Or set Connection to Runner HTTP API and pick a pgtools API credential.',
			itemIndex,
		},
	);
	return withMessage(failure, message);
}

// parseAnswer reads a runner answer: JSON text (HTTP, and the task runner with text_result),
// parsed without losing a number, or an object n8n already parsed (a runner without
// text_result, or an error from n8n itself).
function parseAnswer(body: unknown): Answer | undefined {
	let value: unknown = body;
	let text: string | undefined;
	if (typeof value === 'string' || Buffer.isBuffer(value)) {
		text = value.toString();
		try {
			value = parseJson(text);
		} catch {
			return undefined;
		}
	}
	if (value === null || typeof value !== 'object' || Array.isArray(value)) return undefined;
	const result = value as RunnerResult;
	if (typeof result.success !== 'boolean') return undefined;
	return { result, text: text ?? JSON.stringify(result) };
}

function errorCode(error: unknown): string | undefined {
	const e = error as { cause?: { code?: unknown }; code?: unknown } | undefined;
	const code = e?.cause?.code ?? e?.code;
	return typeof code === 'string' ? code : undefined;
}
