// The built-in tools as nodes: each node file, written from the tool's schema by
// scripts/generate.mjs, is one toolNode(...) call plus the few fields the community-node lint
// must read in the file itself. Everything else comes from the tool's
// schema: its arguments, its description and its "x-pgtools" metadata.
import type { IExecuteFunctions, INodeExecutionData, INodeProperties, INodeTypeDescription } from 'n8n-workflow';
import { NodeConnectionTypes } from 'n8n-workflow';

import { actAsProperty } from './actAs';
import { connectionProperties } from './connection';
import { agentProperties, nodeProperties, toolArgs } from './properties';
import { executeTool, type ToolDefinition } from './runner';
import { toolNames, toolSchemas, type ToolName } from './schemas';

/** tools holds every tool's definition, by wire name: the arguments a node offers and forwards. */
export const tools = {} as Record<ToolName, ToolDefinition>;
for (const tool of toolNames) {
	const schema = toolSchemas[tool];
	tools[tool] = { tool, args: toolArgs(schema, schema['x-pgtools'].hiddenInNodes ?? []), formats: 'format' in schema.properties };
}

/**
 * toolNodeProperties are a node's parameters: the Connection choice, Act as User (the builder's,
 * never the model's), the tool description (as a tool), one parameter per argument, and the
 * response size limit (as a tool).
 */
export function toolNodeProperties(tool: ToolName): INodeProperties[] {
	const { first, last } = agentProperties(toolSchemas[tool].description, tools[tool].args, tools[tool].formats === true);
	return [...connectionProperties, actAsProperty, ...first, ...nodeProperties(tools[tool].args), ...last];
}

/** ToolNodeDescription is a node's description but for what its file states itself (see toolNode). */
export type ToolNodeDescription = Omit<INodeTypeDescription, 'icon' | 'subtitle' | 'usableAsTool' | 'credentials'>;

/** ToolNode is what a node class takes from toolNode: its description and its execute. */
export interface ToolNode {
	description: ToolNodeDescription;
	execute: (this: IExecuteFunctions) => Promise<INodeExecutionData[][]>;
}

/**
 * toolNode builds the node of one tool. The node's name in n8n is the metadata's displayName and
 * its type name that name in camelCase (Execute SQL → executeSql); the default node name is
 * the wire name, which is also the tool name the model sees, since the tool descriptions refer
 * to each other by these names. The group follows the tool's class: read-only tools are input,
 * tools that need the write scope output, the rest transform.
 */
export function toolNode(tool: ToolName): ToolNode {
	const schema = toolSchemas[tool];
	const meta = schema['x-pgtools'];
	const group = meta.readOnly ? 'input' : meta.scope === 'write' ? 'output' : 'transform';
	return {
		description: {
			displayName: meta.displayName,
			name: typeName(meta.displayName),
			group: [group],
			version: 1,
			description: schema.description,
			defaults: { name: tool },
			inputs: [NodeConnectionTypes.Main],
			outputs: [NodeConnectionTypes.Main],
			properties: toolNodeProperties(tool),
		},
		execute: async function (this: IExecuteFunctions) {
			return await executeTool.call(this, tools[tool]);
		},
	};
}

// typeName is a node's type name from its display name: Select Query → selectQuery, Execute SQL → executeSql.
function typeName(displayName: string): string {
	return displayName
		.split(' ')
		.map((word, i) => (i === 0 ? word.toLowerCase() : word.charAt(0).toUpperCase() + word.slice(1).toLowerCase()))
		.join('');
}
