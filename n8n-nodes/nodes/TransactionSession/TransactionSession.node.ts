import type { INodeType, INodeTypeDescription } from 'n8n-workflow';

import { toolNode } from '../../shared/tools';

const node = toolNode('pg_tx');

/** TransactionSession is the Transaction Session node: the pgtools tool pg_tx, built from schemas/pg_tx.json. */
export class TransactionSession implements INodeType {
	// icon, subtitle, usableAsTool and credentials stay in this literal: the community-node lint reads them here.
	description: INodeTypeDescription = {
		...node.description,
		icon: { light: 'file:../../icons/pgtools.svg', dark: 'file:../../icons/pgtools.dark.svg' },
		subtitle: 'pgtools: pg_tx',
		usableAsTool: true,
		credentials: [{ name: 'pgToolsApi', required: true, displayOptions: { show: { connection: ['http'] } } }],
	};
	execute = node.execute;
}
