// The tools' JSON Schemas, read from schemas/ at build time (tsc copies them into dist/schemas/),
// so the nodes show the model the same words as the HTTP API and MCP.
import deleteData from '../../schemas/delete_data.json';
import describeSchema from '../../schemas/describe_schema.json';
import executeSql from '../../schemas/execute_sql.json';
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

/** ToolSchema is the part of a tool's argument schema (schemas/<tool>.json) the nodes read. */
export interface ToolSchema {
	title: string;
	description: string;
	required?: readonly string[];
	properties: Record<string, SchemaProperty>;
}

/** ToolName is a tool's wire name: the HTTP path segment and the MCP tool name. */
export type ToolName =
	| 'select_query'
	| 'insert_data'
	| 'update_data'
	| 'delete_data'
	| 'execute_sql'
	| 'describe_schema'
	| 'pg_tx'
	| 'pg_transaction';

/** toolSchemas maps every tool to its argument schema. */
export const toolSchemas: Record<ToolName, ToolSchema> = {
	select_query: selectQuery,
	insert_data: insertData,
	update_data: updateData,
	delete_data: deleteData,
	execute_sql: executeSql,
	describe_schema: describeSchema,
	pg_tx: pgTx,
	pg_transaction: pgTransaction,
};
