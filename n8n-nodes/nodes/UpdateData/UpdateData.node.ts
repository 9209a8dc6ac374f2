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

/** UpdateData is the Update Data node: the pgtools tool update_data. */
export class UpdateData implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'Update Data',
		name: 'updateData',
		icon: { light: 'file:../../icons/pgtools.svg', dark: 'file:../../icons/pgtools.dark.svg' },
		group: ['output'],
		version: 1,
		subtitle: 'pgtools: update_data',
		description: toolSchemas.update_data.description,
		// The default name is the tool's wire name, which is also the tool name the model sees:
		// the tool descriptions refer to each other by these names.
		defaults: { name: 'update_data' },
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
		properties: toolNodeProperties('update_data'),
	};

	methods = { credentialTest: { pgToolsApiTest: testPgToolsApi } };

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		return await executeTool.call(this, tools.update_data);
	}
}
