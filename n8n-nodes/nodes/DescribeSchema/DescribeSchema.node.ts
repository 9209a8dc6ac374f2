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

/** DescribeSchema is the Describe Schema node: the pgtools tool describe_schema. */
export class DescribeSchema implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'Describe Schema',
		name: 'describeSchema',
		icon: { light: 'file:../../icons/pgtools.svg', dark: 'file:../../icons/pgtools.dark.svg' },
		group: ['input'],
		version: 1,
		subtitle: 'pgtools: describe_schema',
		description: toolSchemas.describe_schema.description,
		// The default name is the tool's wire name, which is also the tool name the model sees:
		// the tool descriptions refer to each other by these names.
		defaults: { name: 'describe_schema' },
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
		properties: toolNodeProperties('describe_schema'),
	};

	methods = { credentialTest: { pgToolsApiTest: testPgToolsApi } };

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		return await executeTool.call(this, tools.describe_schema);
	}
}
