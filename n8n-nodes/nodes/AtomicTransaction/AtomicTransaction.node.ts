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

/** AtomicTransaction is the Atomic Transaction node: the pgtools tool pg_transaction. */
export class AtomicTransaction implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'Atomic Transaction',
		name: 'atomicTransaction',
		icon: { light: 'file:../../icons/pgtools.svg', dark: 'file:../../icons/pgtools.dark.svg' },
		group: ['transform'],
		version: 1,
		subtitle: 'pgtools: pg_transaction',
		description: toolSchemas.pg_transaction.description,
		// The default name is the tool's wire name, which is also the tool name the model sees:
		// the tool descriptions refer to each other by these names.
		defaults: { name: 'pg_transaction' },
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
		properties: toolNodeProperties('pg_transaction'),
	};

	methods = { credentialTest: { pgToolsApiTest: testPgToolsApi } };

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		return await executeTool.call(this, tools.pg_transaction);
	}
}
