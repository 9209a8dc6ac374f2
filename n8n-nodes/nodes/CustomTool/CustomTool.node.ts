import type { INodeType, INodeTypeDescription } from 'n8n-workflow';
import { NodeConnectionTypes } from 'n8n-workflow';

import { customToolProperties, executeCustomTool, loadCustomTools, supplyCustomTool } from '../../shared/customTool';

/**
 * CustomTool is the Custom Tool node: one operator-defined tool of the runner (custom_tools),
 * picked from the runner's list, offered to an AI Agent with the runner's description and JSON
 * Schema. Unlike the built-in tool nodes it is a tool node itself (supplyData and an ai_tool
 * output) rather than usableAsTool, whose tool schema n8n builds from $fromAI() calls, which
 * cannot say integer, array of strings or enum.
 */
export class CustomTool implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'pgtools Custom Tool',
		name: 'customTool',
		icon: { light: 'file:../../icons/pgtools.svg', dark: 'file:../../icons/pgtools.dark.svg' },
		group: ['transform'],
		version: 1,
		subtitle: '={{ "pgtools: " + $parameter["customTool"] }}',
		description: 'An operator-defined pgtools tool (custom_tools): a named, parameterized statement the AI Agent may call',
		defaults: { name: 'Custom Tool' },
		inputs: [],
		outputs: [NodeConnectionTypes.AiTool],
		outputNames: ['Tool'],
		credentials: [{ name: 'pgToolsApi', required: true }],
		properties: customToolProperties(),
	};

	methods = {
		loadOptions: { getCustomTools: loadCustomTools },
	};

	supplyData = supplyCustomTool;

	execute = executeCustomTool;
}
