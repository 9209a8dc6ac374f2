// Turns a tool's JSON Schema into n8n node parameters. Every parameter defaults to a $fromAI()
// expression carrying the schema's own description, so a node dropped on an AI Agent works with
// no setup and the model reads the same words as over HTTP or MCP; a builder may replace any
// default with a fixed value (which also removes it from the tool schema the model sees).
import type { INodeProperties, NodePropertyTypes } from 'n8n-workflow';

import type { SchemaProperty, ToolSchema } from './schemas';

/**
 * ArgKind is how an argument travels through n8n: $fromAI only knows string, number, boolean
 * and json, so lists are comma-separated strings and structured values are json.
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
	/** schemaDefault is the schema's default; a value equal to it is not sent, so the runner's configured default applies. */
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
			};
			if (prop.default !== undefined) arg.schemaDefault = prop.default;
			if (prop.minimum !== undefined) arg.minimum = prop.minimum;
			if (prop.enum) arg.options = prop.enum;
			if (kind === 'json') arg.jsonShape = prop.type === 'object' || prop.type === 'array' ? prop.type : 'any';
			return arg;
		});
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
 * fromAIType is the $fromAI type of an argument. An optional JSON argument travels as a string
 * holding JSON (the node parses it): n8n's json type accepts only a non-empty object or array,
 * so any default would make the argument required in the tool schema the model sees.
 */
export function fromAIType(arg: ToolArg): 'string' | 'number' | 'boolean' | 'json' {
	if (arg.kind === 'options') return 'string';
	if (arg.kind === 'json' && !arg.required) return 'string';
	return arg.kind;
}

/**
 * fromAIExpression is the default value of an argument's node parameter. A required argument
 * has no $fromAI default, so the model must fill it; an optional one gets a default (the
 * schema's, or an empty value that is never sent), which makes it optional in the tool schema.
 */
export function fromAIExpression(arg: ToolArg): string {
	const parts = [quote(arg.key), quote(arg.description), quote(fromAIType(arg))];
	if (!arg.required) parts.push(fromAIDefault(arg));
	return `={{ $fromAI(${parts.join(', ')}) }}`;
}

function fromAIDefault(arg: ToolArg): string {
	switch (arg.kind) {
		case 'number':
			return String(typeof arg.schemaDefault === 'number' ? arg.schemaDefault : 0);
		case 'boolean':
			return String(arg.schemaDefault === true);
		default:
			return quote(typeof arg.schemaDefault === 'string' ? arg.schemaDefault : '');
	}
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
