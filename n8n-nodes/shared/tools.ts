// The eight tool definitions the nodes forward to: wire name plus arguments read from schemas/.
import type { INodeProperties } from 'n8n-workflow';

import { connectionProperties } from './connection';
import { agentProperties, nodeProperties, toolArgs } from './properties';
import type { ToolDefinition } from './runner';
import { toolSchemas, type ToolName } from './schemas';

function define(tool: ToolName, skip: readonly string[] = []): ToolDefinition {
	return { tool, args: toolArgs(toolSchemas[tool], skip) };
}

/** tools holds every tool's definition, by wire name. */
export const tools: Record<ToolName, ToolDefinition> = {
	select_query: define('select_query'),
	insert_data: define('insert_data'),
	update_data: define('update_data'),
	delete_data: define('delete_data'),
	execute_sql: define('execute_sql'),
	describe_schema: define('describe_schema'),
	pg_tx: define('pg_tx'),
	// action accepts only "transaction" and exists for callers of the older API: not worth the
	// model's attention.
	pg_transaction: define('pg_transaction', ['action']),
};

/**
 * toolNodeProperties are a node's parameters: the Connection choice, the tool description (as a
 * tool), one parameter per argument, and the response size limit (as a tool).
 */
export function toolNodeProperties(tool: ToolName): INodeProperties[] {
	const { first, last } = agentProperties(toolSchemas[tool].description, tools[tool].args);
	return [...connectionProperties, ...first, ...nodeProperties(tools[tool].args), ...last];
}
