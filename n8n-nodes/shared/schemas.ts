// The tools' JSON Schemas, read from schemas/ at build time (tsc copies them into dist/schemas/),
// so the nodes show the model the same words as the HTTP API and MCP, and take each tool's name,
// node name and class from the same "x-pgtools" object the runner reads.
import deleteData from '../../schemas/delete_data.json';
import describeSchema from '../../schemas/describe_schema.json';
import executeSql from '../../schemas/execute_sql.json';
import explainQuery from '../../schemas/explain_query.json';
import insertData from '../../schemas/insert_data.json';
import pgTransaction from '../../schemas/pg_transaction.json';
import pgTx from '../../schemas/pg_tx.json';
import selectQuery from '../../schemas/select_query.json';
import updateData from '../../schemas/update_data.json';

/** SchemaProperty is the part of a JSON Schema property the nodes read. */
export interface SchemaProperty {
	description?: string;
	type?: string;
	enum?: readonly string[];
	default?: unknown;
	minimum?: number;
	pattern?: string;
	anyOf?: readonly SchemaProperty[];
	/** properties, required and items describe an object's keys and an array's items, named in the model's description. */
	properties?: Record<string, SchemaProperty>;
	required?: readonly string[];
	items?: SchemaProperty;
}

/** ToolMeta is a tool's "x-pgtools" object: what pgtools knows of it beside its arguments (see schemas/meta.go). */
export interface ToolMeta {
	/** name is the wire name: the HTTP path segment, the MCP tool name and the task's tool. */
	name: string;
	/** displayName is the node's name in n8n, e.g. Select Query. */
	displayName: string;
	operation: string;
	/** scope is the token scope the tool needs: read or write. */
	scope: string;
	readOnly: boolean;
	destructive: boolean;
	idempotent: boolean;
	/** hiddenInNodes are arguments the nodes do not offer the model (kept for older callers). */
	hiddenInNodes?: readonly string[];
}

/** ToolSchema is the part of a tool's argument schema (schemas/<tool>.json) the nodes read. */
export interface ToolSchema {
	title: string;
	description: string;
	required?: readonly string[];
	properties: Record<string, SchemaProperty>;
	'x-pgtools': ToolMeta;
}

// The one list of tools on the TypeScript side: tsc bundles only the JSON files it sees imported.
const schemas = {
	select_query: selectQuery,
	insert_data: insertData,
	update_data: updateData,
	delete_data: deleteData,
	execute_sql: executeSql,
	describe_schema: describeSchema,
	explain_query: explainQuery,
	pg_tx: pgTx,
	pg_transaction: pgTransaction,
};

/** ToolName is a tool's wire name: the HTTP path segment and the MCP tool name. */
export type ToolName = keyof typeof schemas;

/** toolSchemas maps every tool to its argument schema, in the runner's canonical order. */
export const toolSchemas: Record<ToolName, ToolSchema> = schemas;

/** toolNames lists the wire names in the runner's canonical order. */
export const toolNames = Object.keys(toolSchemas) as ToolName[];
