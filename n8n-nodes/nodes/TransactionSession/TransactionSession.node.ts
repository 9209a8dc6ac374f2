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

/** TransactionSession is the Transaction Session node: the pgtools tool pg_tx. */
export class TransactionSession implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'Transaction Session',
		name: 'transactionSession',
		icon: { light: 'file:../../icons/pgtools.svg', dark: 'file:../../icons/pgtools.dark.svg' },
		group: ['transform'],
		version: 1,
		subtitle: 'pgtools: pg_tx',
		description: toolSchemas.pg_tx.description,
		// The default name is the tool's wire name, which is also the tool name the model sees:
		// the tool descriptions refer to each other by these names.
		defaults: { name: 'pg_tx' },
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
		properties: toolNodeProperties('pg_tx'),
	};

	methods = { credentialTest: { pgToolsApiTest: testPgToolsApi } };

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		return await executeTool.call(this, tools.pg_tx);
	}
}
