import type { INodeType, INodeTypeDescription } from 'n8n-workflow';

import { toolNode } from '../../shared/tools';

const node = toolNode('pg_transaction');

/** AtomicTransaction is the Atomic Transaction node: the pgtools tool pg_transaction, built from schemas/pg_transaction.json. */
export class AtomicTransaction implements INodeType {
	// icon, subtitle, usableAsTool and credentials stay in this literal: the community-node lint reads them here.
	description: INodeTypeDescription = {
		...node.description,
		icon: { light: 'file:../../icons/pgtools.svg', dark: 'file:../../icons/pgtools.dark.svg' },
		subtitle: 'pgtools: pg_transaction',
		usableAsTool: true,
		credentials: [{ name: 'pgToolsApi', required: true, displayOptions: { show: { connection: ['http'] } } }],
	};
	execute = node.execute;
}
