import type { INodeType, INodeTypeDescription } from 'n8n-workflow';

import { toolNode } from '../../shared/tools';

const node = toolNode('select_query');

/** SelectQuery is the Select Query node: the pgtools tool select_query, built from schemas/select_query.json. */
export class SelectQuery implements INodeType {
	// icon, subtitle, usableAsTool and credentials stay in this literal: the community-node lint reads them here.
	description: INodeTypeDescription = {
		...node.description,
		icon: { light: 'file:../../icons/pgtools.svg', dark: 'file:../../icons/pgtools.dark.svg' },
		subtitle: 'pgtools: select_query',
		usableAsTool: true,
		credentials: [{ name: 'pgToolsApi', required: true, displayOptions: { show: { connection: ['http'] } } }],
	};
	execute = node.execute;
}
