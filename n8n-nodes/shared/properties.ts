// Turns a tool's JSON Schema into n8n node parameters. Every parameter defaults to a $fromAI()
// expression carrying the schema's own description, so a node dropped on an AI Agent works with
// no setup and the model reads the same words as over HTTP or MCP; a builder may replace any
// default with a fixed value (which also removes it from the tool schema the model sees).
import type { INodeProperties, NodePropertyTypes } from 'n8n-workflow';

import type { SchemaProperty, ToolSchema } from './schemas';

/**
 * ArgKind is how an argument travels through n8n: $fromAI only knows string, number, boolean
 * and json, so lists are comma-separated strings and structured values (objects, arrays,
 * params) are json.
 */
export type ArgKind = 'string' | 'options' | 'number' | 'boolean' | 'json';

/** ToolArg describes one tool argument as a node parameter. */
export interface ToolArg {
	/** key is the argument's name in the request body and the $fromAI key the model sees. */
	key: string;
	/** param is the node parameter name (camelCase, as in n8n's own nodes). */
	param: string;
	kind: ArgKind;
	required: boolean;
	/** description is the schema's description, word for word. */
	description: string;
	/** modelDescription is what the model reads: the schema's words, then what n8n's tool schema cannot say (the JSON shape, the allowed values). */
	modelDescription: string;
	/** schemaDefault is the schema's default, for reference: the node sends a value equal to it like any other. */
	schemaDefault?: unknown;
	minimum?: number;
	/** jsonShape is the JSON type a json argument must have once parsed. */
	jsonShape?: 'object' | 'array' | 'any';
	options?: readonly string[];
}

/** toolArgs lists the arguments of a schema in schema order, leaving out the keys in skip. */
export function toolArgs(schema: ToolSchema, skip: readonly string[] = []): ToolArg[] {
	const required = new Set(schema.required ?? []);
	return Object.entries(schema.properties)
		.filter(([key]) => !skip.includes(key))
		.map(([key, prop]) => {
			const kind = argKind(prop);
			const arg: ToolArg = {
				key,
				param: camelCase(key),
				kind,
				required: required.has(key),
				description: prop.description ?? '',
				modelDescription: '',
			};
			if (prop.default !== undefined) arg.schemaDefault = prop.default;
			if (prop.minimum !== undefined) arg.minimum = prop.minimum;
			if (prop.enum) arg.options = prop.enum;
			if (kind === 'json') arg.jsonShape = jsonShape(prop);
			arg.modelDescription = [arg.description, typeNote(arg, prop)].filter(Boolean).join(' ');
			return arg;
		});
}

function jsonShape(prop: SchemaProperty): 'object' | 'array' | 'any' {
	if (prop.type === 'object' || prop.type === 'array') return prop.type;
	return prop.anyOf?.some((branch) => branch.type === 'array') ? 'array' : 'any';
}

/**
 * typeNote says in words what a $fromAI tool schema cannot: n8n's json type reaches the model
 * with no "type" and no keys, and a string has no enum. Numbers JavaScript cannot hold exactly
 * must travel as strings, or the node refuses them (see runner.ts).
 */
function typeNote(arg: ToolArg, prop: SchemaProperty): string {
	if (arg.options) return `One of: ${arg.options.map((o) => JSON.stringify(o)).join(', ')}.`;
	if (arg.kind !== 'json') return '';
	const what = arg.jsonShape === 'array' ? 'a JSON array' : arg.jsonShape === 'object' ? 'a JSON object' : 'JSON';
	const keys = prop.type === 'object' ? keyList(prop) : prop.type === 'array' && prop.items ? keyList(prop.items) : '';
	const shape = keys ? (prop.type === 'array' ? `, each item with the keys ${keys}` : ` with the keys ${keys}`) : '';
	return `Type: ${what}${shape}. Write numbers of more than 15 digits as strings, e.g. "12345678901234567890".`;
}

// keyList names an object schema's keys, marking the required ones and listing allowed values.
function keyList(prop: SchemaProperty): string {
	if (!prop.properties) return '';
	const required = new Set(prop.required ?? []);
	return Object.entries(prop.properties)
		.map(([key, p]) => {
			const notes = [required.has(key) ? 'required' : '', p.enum ? `one of ${p.enum.map((o) => JSON.stringify(o)).join(', ')}` : '']
				.filter(Boolean)
				.join('; ');
			return notes ? `${key} (${notes})` : key;
		})
		.join(', ');
}

function argKind(prop: SchemaProperty): ArgKind {
	if (prop.enum) return 'options';
	switch (prop.type) {
		case 'string':
			return 'string';
		case 'integer':
		case 'number':
			return 'number';
		case 'boolean':
			return 'boolean';
		case 'object':
		case 'array':
			return 'json';
	}
	// anyOf: a list that may also be a comma-separated string stays a string; anything else
	// (params: an array, or a string holding one) is JSON.
	if (prop.anyOf?.some((branch) => branch.type === 'string' && branch.pattern === undefined)) {
		return 'string';
	}
	return 'json';
}

/**
 * fromAIType is the $fromAI type of an argument: objects, arrays and params are json, so the
 * model is offered them as JSON; enums are strings (n8n's tool schema has no enum: the allowed
 * values are named in the description).
 */
export function fromAIType(arg: ToolArg): 'string' | 'number' | 'boolean' | 'json' {
	if (arg.kind === 'options') return 'string';
	return arg.kind;
}

/**
 * omitted is the $fromAI default of an optional JSON argument. n8n's json type accepts only a
 * non-empty object or array, and a default it would refuse makes the argument required in the
 * tool schema the model sees; so the default is this marker, which the node never sends.
 */
export const omitted = { object: { omitted: true }, array: ['omitted'] } as const;

/** isOmitted reports whether a JSON argument's value is the omitted marker. */
export function isOmitted(value: unknown): boolean {
	const text = JSON.stringify(value);
	return text === JSON.stringify(omitted.object) || text === JSON.stringify(omitted.array);
}

/**
 * fromAIExpression is the default value of an argument's node parameter. A required argument
 * has no $fromAI default, so the model must fill it; an optional one gets unsetValue as its
 * default, which makes it optional in the tool schema and is never sent.
 */
export function fromAIExpression(arg: ToolArg): string {
	const parts = [quote(arg.key), quote(arg.modelDescription), quote(fromAIType(arg))];
	if (!arg.required) parts.push(fromAIDefault(arg));
	return `={{ $fromAI(${parts.join(', ')}) }}`;
}

/**
 * unsetValue is the value that means "not given" for an optional argument: the $fromAI default
 * when the model leaves the argument out, which the node does not send, so the runner applies
 * its own (possibly configured) default. It is never a value the model could mean: an empty
 * string, a number below the schema's minimum (limit 0, offset -1), the omitted marker for JSON;
 * for a boolean false, which is the runner's default of every boolean argument.
 */
export function unsetValue(arg: ToolArg): unknown {
	switch (arg.kind) {
		case 'number':
			return (arg.minimum ?? 0) - 1;
		case 'boolean':
			return false;
		case 'json':
			return arg.jsonShape === 'object' ? omitted.object : omitted.array;
		default:
			return '';
	}
}

function fromAIDefault(arg: ToolArg): string {
	const unset = unsetValue(arg);
	return typeof unset === 'string' || typeof unset === 'object' ? quote(typeof unset === 'string' ? unset : JSON.stringify(unset)) : String(unset);
}

// quote makes a single-quoted literal that both JavaScript (the expression) and n8n's $fromAI
// parser (the tool schema) read back as the original text.
function quote(text: string): string {
	return `'${text.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
}

/** nodeProperties turns arguments into node parameters. */
export function nodeProperties(args: readonly ToolArg[]): INodeProperties[] {
	return args.map((arg) => {
		const property: INodeProperties = {
			displayName: displayName(arg.key),
			name: arg.param,
			type: arg.kind as NodePropertyTypes,
			default: fromAIExpression(arg),
			required: arg.required,
			description: arg.description,
		};
		if (arg.options) {
			property.options = arg.options.map((value) => ({ name: displayName(value), value }));
		}
		if (arg.kind === 'string' && /sql|where/.test(arg.key)) {
			property.typeOptions = { rows: 3 };
		}
		return property;
	});
}

/**
 * defaultResponseSize is the byte budget of one answer handed to a model, 16 KiB: about 4,000
 * tokens, some 140 rows of a typical table. An AI Agent keeps every tool answer in its context
 * for the rest of the run (up to 10 tool calls by default), so 10 such answers stay near 40,000
 * tokens; a default read of 1000 rows would be 28,000 tokens in one answer.
 */
export const defaultResponseSize = 16384;

/**
 * agentProperties are the options a node has as an AI Agent tool only ('@tool'): the tool
 * description, which names the values the workflow pinned so that two nodes of one kind (two
 * Select Query nodes on different tables) tell the model which is which, and the byte budget
 * of one answer.
 */
export function agentProperties(description: string, args: readonly ToolArg[], formats = false): { first: INodeProperties[]; last: INodeProperties[] } {
	const onlyAsTool = { show: { '@tool': [true] } };
	return {
		first: [
			{
				displayName: 'Description',
				name: 'toolDescription',
				type: 'string',
				default: `=${description}{{ ${pinnedExpression(args)} }}`,
				required: true,
				typeOptions: { rows: 3 },
				description:
					'What the model reads about this tool. By default the tool\'s own description, then the values this node fixes (e.g. the table), so that several nodes of one kind are told apart.',
				displayOptions: onlyAsTool,
			},
		],
		last: [
			{
				displayName: 'Response Size Limit (Bytes)',
				name: 'responseSizeLimit',
				type: 'number',
				default: defaultResponseSize,
				typeOptions: { minValue: 0 },
				description:
					'Most bytes of rows one answer hands the model; past it the runner drops the rest and answers truncated: true with a hint to page. 0: only the runner\'s own cap (4 MiB unless configured).',
				displayOptions: onlyAsTool,
			},
			{
				displayName: 'Max Estimated Cost',
				name: 'maxEstimatedCost',
				type: 'number',
				default: 0,
				typeOptions: { minValue: 0, numberPrecision: 2 },
				description:
					'Refuse, before it runs, any statement of this tool whose plan PostgreSQL estimates above this cost (too_expensive, with the plan and a cheaper call for the model). Only lowers the runner\'s policy.max_estimated_cost. 0: the runner\'s budget.',
				displayOptions: onlyAsTool,
			},
			{
				displayName: 'Max Estimated Rows',
				name: 'maxEstimatedRows',
				type: 'number',
				default: 0,
				typeOptions: { minValue: 0 },
				description:
					'Refuse, before it runs, any statement of this tool estimated to return (or, for a write, touch) more rows than this. Only lowers the runner\'s policy.max_estimated_rows. 0: the runner\'s budget.',
				displayOptions: onlyAsTool,
			},
			...(formats
				? [
						{
							displayName: 'Row Format',
							name: 'rowFormat',
							type: 'options' as const,
							default: '',
							options: [
								{ name: 'Columns (Fewest Tokens)', value: 'columns', description: 'Column names once, then each row as an array' },
								{ name: 'CSV', value: 'csv', description: 'RFC 4180 text with a header line' },
								{ name: 'Objects', value: 'objects', description: 'One object per row, keyed by column name' },
								{ name: 'Runner Default', value: '', description: "The database's or the credential token's default format" },
							],
							description: 'How the answer\'s rows reach the model; the values are the same in every format. Not offered to the model.',
							displayOptions: onlyAsTool,
						},
					]
				: []),
		],
	};
}

// pinnedExpression is an n8n expression naming the arguments whose parameter holds a fixed value
// rather than an expression ($fromAI or another): ' Fixed for this tool: table "orders".'
function pinnedExpression(args: readonly ToolArg[]): string {
	const params = JSON.stringify(args.map((a) => [a.key, a.param]));
	return `(${params}).filter(([k, p]) => ![undefined, null, ''].includes($rawParameter[p]) && !String($rawParameter[p]).startsWith('=')).map(([k, p]) => k + ' ' + JSON.stringify($rawParameter[p])).join(', ').replace(/^(.+)$/, ' Fixed for this tool: $1.')`;
}

const words: Record<string, string> = { id: 'ID', sql: 'SQL' };

/** displayName turns a snake_case key into the label n8n shows, e.g. session_id → Session ID. */
export function displayName(key: string): string {
	return key
		.split(/[_ ]/)
		.map((word) => words[word] ?? word.charAt(0).toUpperCase() + word.slice(1))
		.join(' ');
}

function camelCase(key: string): string {
	return key.replace(/_([a-z])/g, (_, letter: string) => letter.toUpperCase());
}
