// The Custom Tool node's shared part: an operator-defined tool (custom_tools in the runner's
// config) is listed by GET /v1/tools like the built-ins, so the node reads its name, description
// and JSON Schema from the runner at run time instead of from schemas/. The model is given that
// JSON Schema itself (see modelTool), so its parameters keep their types, required list, enums
// and bounds; calls go through the same client as every other node (runner.ts).
import type {
	IDataObject,
	IExecuteFunctions,
	IHttpRequestOptions,
	ILoadOptionsFunctions,
	INodeExecutionData,
	INodeProperties,
	INodePropertyOptions,
	ISupplyDataFunctions,
	SupplyData,
} from 'n8n-workflow';
import { NodeApiError, NodeOperationError } from 'n8n-workflow';

import { actAsProperty } from './actAs';
import { connectionProperties } from './connection';
import { inexactNumbers } from './json';
import { agentProperties } from './properties';
import { type Body, type BuiltArguments, credentialType, executeTool, invalidArguments, roundedProblem } from './runner';
import { toolNames } from './schemas';

/** customToolParam is the node parameter holding the picked tool's name. */
export const customToolParam = 'customTool';

/** RunnerTool is one entry of GET /v1/tools: what the runner serves a caller (tools.ToolInfo). */
export interface RunnerTool {
	name: string;
	description: string;
	inputSchema: IDataObject & { properties?: IDataObject; required?: string[] };
	readOnlyHint?: boolean;
	destructiveHint?: boolean;
}

/** ModelTool is what supplyData hands the AI Agent: a tool with a JSON Schema, which n8n turns into zod itself. */
export interface ModelTool {
	name: string;
	description: string;
	schema: RunnerTool['inputSchema'];
}

type Context = IExecuteFunctions | ISupplyDataFunctions | ILoadOptionsFunctions;

/**
 * listRunnerTools reads GET /v1/tools with the pgtools API credential: the tools this token may
 * call, built-in and custom. Only the token's tools are listed (tokens[].tools, scopes), so the
 * picker offers exactly what the calls may use.
 */
export async function listRunnerTools(this: Context): Promise<RunnerTool[]> {
	const credentials = await this.getCredentials(credentialType);
	const baseUrl = String(credentials.url ?? '').replace(/\/+$/, '');
	const fix = 'Check that pgtools serve is running and that the URL in the pgtools API credential is its address, e.g. http://127.0.0.1:8080, with a valid token.';
	if (!/^https?:\/\//.test(baseUrl)) {
		throw new NodeOperationError(this.getNode(), `The pgtools API credential has no valid URL ("${baseUrl}")`, { description: fix });
	}
	const options: IHttpRequestOptions = { method: 'GET', url: `${baseUrl}/v1/tools`, json: true, headers: { Accept: 'application/json' } };
	let answer: unknown;
	try {
		answer = await this.helpers.httpRequestWithAuthentication.call(this, credentialType, options);
	} catch (error) {
		const status = (error as { httpCode?: unknown }).httpCode;
		throw new NodeOperationError(
			this.getNode(),
			`Cannot list the tools of the pgtools runner at ${baseUrl}${status ? ` (HTTP ${String(status)})` : ''}. ${fix}`,
			{ description: fix },
		);
	}
	const list = (answer as { tools?: unknown } | undefined)?.tools;
	if (!Array.isArray(list)) {
		throw new NodeApiError(this.getNode(), {}, {
			message: `The server at ${baseUrl} did not answer GET /v1/tools like a pgtools runner`,
			description: 'Set the URL in the pgtools API credential to the runner\'s base address (without /v1), e.g. http://127.0.0.1:8080.',
		});
	}
	return list as RunnerTool[];
}

/** customTools keeps the operator-defined tools of a list: every tool that is not one of the built-ins (which have their own nodes). */
export function customTools(list: readonly RunnerTool[]): RunnerTool[] {
	const builtIn = new Set<string>(toolNames);
	return list.filter((tool) => !builtIn.has(tool.name));
}

/** customToolOptions are the picker's choices: the custom tools by name, their description as the hint. */
export function customToolOptions(list: readonly RunnerTool[]): INodePropertyOptions[] {
	return customTools(list)
		.map((tool) => ({
			name: tool.name,
			value: tool.name,
			description: `${tool.readOnlyHint ? 'Read' : 'Write'}: ${tool.description}`,
		}))
		.sort((a, b) => a.name.localeCompare(b.name));
}

/** loadCustomTools is the picker's loadOptions method. */
export async function loadCustomTools(this: ILoadOptionsFunctions): Promise<INodePropertyOptions[]> {
	return customToolOptions(await listRunnerTools.call(this));
}

/**
 * pickedTool is the picked custom tool as the runner serves it now, or a failure naming the fix:
 * a tool removed from the config (or hidden from this token) since the node was set up.
 */
export async function pickedTool(this: IExecuteFunctions | ISupplyDataFunctions, itemIndex: number): Promise<RunnerTool> {
	const name = String(this.getNodeParameter(customToolParam, itemIndex, ''));
	const custom = customTools(await listRunnerTools.call(this));
	const tool = custom.find((t) => t.name === name);
	if (tool) return tool;
	const names = custom.map((t) => t.name).join(', ') || 'none';
	const message = name
		? `The pgtools runner serves no custom tool "${name}" to this token (its custom tools: ${names})`
		: 'No custom tool is picked';
	throw new NodeOperationError(this.getNode(), message, {
		description:
			'Pick a tool in the node\'s Tool list. A tool appears once it is in custom_tools of the runner\'s config (reload with SIGHUP) and the credential\'s token may call it (scopes, tokens[].tools).',
		itemIndex,
	});
}

/**
 * modelTool is the tool the model is offered: the runner's name, description and input schema,
 * unchanged. n8n's AI Agent converts a tool's JSON Schema into zod with the converter its MCP
 * Client Tool uses (normalizeToolSchema, convertJsonSchemaToZod), so integer, array, enum,
 * required and bounds reach the model as the runner states them, which $fromAI (string, number,
 * boolean, json) could not say.
 */
export function modelTool(tool: RunnerTool, description?: string): ModelTool {
	return { name: tool.name, description: description?.trim() || tool.description, schema: structuredClone(tool.inputSchema) };
}

/**
 * customArguments is one call's request body from the arguments the AI Agent merged into the
 * item: the keys of the tool's schema, as the model gave them (the runner validates them), and
 * nothing else (n8n adds keys of its own, such as toolCallId). A number the model wrote past
 * what JavaScript holds exactly was rounded when n8n parsed the call; it is refused rather than
 * sent as a different value.
 */
export function customArguments(tool: RunnerTool, json: IDataObject): BuiltArguments {
	const body: Body = {};
	const rounded: string[] = [];
	for (const key of Object.keys(tool.inputSchema.properties ?? {})) {
		const value = json[key];
		if (value === undefined) continue;
		rounded.push(...inexactNumbers(value, key));
		body[key] = value;
	}
	return rounded.length > 0 ? { invalid: invalidArguments([roundedProblem(rounded)], true) } : { body };
}

/** descriptionParam is the optional override of the description the model reads. */
const descriptionParam = 'toolDescription';

/** customToolProperties are the node's parameters: Connection, Act as User, the tool picker, a description override, the response size limit. */
export function customToolProperties(): INodeProperties[] {
	const { last } = agentProperties('', []);
	return [
		...connectionProperties,
		{
			displayName:
				'The tool list, its description and its parameters come from the runner through the pgtools API credential, with either connection; with n8n Task Runner only the calls go through the task broker.',
			name: 'customToolNotice',
			type: 'notice',
			default: '',
		},
		actAsProperty,
		{
			displayName: 'Tool Name or ID',
			name: customToolParam,
			type: 'options',
			typeOptions: { loadOptionsMethod: 'getCustomTools' },
			default: '',
			required: true,
			description:
				'An operator-defined tool (custom_tools in the runner\'s config) that this credential\'s token may call. The model reads its description and parameters as the runner serves them. Choose from the list, or specify an ID using an <a href="https://docs.n8n.io/code/expressions/">expression</a>.',
		},
		{
			displayName: 'Description Override',
			name: descriptionParam,
			type: 'string',
			default: '',
			typeOptions: { rows: 3 },
			description: 'What the model reads about this tool instead of the runner\'s description. Empty: the runner\'s.',
		},
		// The node is always a tool, so the size limit shows without the '@tool' condition.
		...last.map((property) => ({ ...property, displayOptions: undefined })),
	];
}

/** supplyCustomTool is the node's supplyData: the picked tool as the model sees it. */
export async function supplyCustomTool(this: ISupplyDataFunctions, itemIndex: number): Promise<SupplyData> {
	const tool = await pickedTool.call(this, itemIndex);
	const description = String(this.getNodeParameter(descriptionParam, itemIndex, ''));
	return { response: modelTool(tool, description) };
}

/**
 * executeCustomTool is the node's execute: the AI Agent runs it with the model's arguments
 * merged into each item, and it calls the picked tool once per item.
 */
export async function executeCustomTool(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
	const tool = await pickedTool.call(this, 0);
	const items = this.getInputData();
	return await executeTool.call(this, { tool: tool.name, args: [] }, (itemIndex) =>
		customArguments(tool, items[itemIndex]?.json ?? {}),
	);
}
