import type {
	IExecuteFunctions,
	INodeExecutionData,
	INodeType,
	INodeTypeDescription,
} from 'n8n-workflow';
import { NodeConnectionTypes } from 'n8n-workflow';

import { testPgToolsApi } from '../../shared/credentialTest';
import { executeTool } from '../../shared/runner';
import { toolSchemas } from '../../shared/schemas';
import { toolNodeProperties, tools } from '../../shared/tools';

/** SelectQuery is the Select Query node: the pgtools tool select_query. */
export class SelectQuery implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'Select Query',
		name: 'selectQuery',
		icon: { light: 'file:../../icons/pgtools.svg', dark: 'file:../../icons/pgtools.dark.svg' },
		group: ['input'],
		version: 1,
		subtitle: 'pgtools: select_query',
		description: toolSchemas.select_query.description,
		// The default name is the tool's wire name, which is also the tool name the model sees:
		// the tool descriptions refer to each other by these names.
		defaults: { name: 'select_query' },
		inputs: [NodeConnectionTypes.Main],
		outputs: [NodeConnectionTypes.Main],
		usableAsTool: true,
		// The credential is asked for only with the HTTP connection.
		credentials: [
			{
				name: 'pgToolsApi',
				required: true,
				testedBy: 'pgToolsApiTest',
				displayOptions: { show: { connection: ['http'] } },
			},
		],
		properties: toolNodeProperties('select_query'),
	};

	methods = { credentialTest: { pgToolsApiTest: testPgToolsApi } };

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		return await executeTool.call(this, tools.select_query);
	}
}
