import type { INodeType, INodeTypeDescription } from 'n8n-workflow';

import { toolNode } from '../../shared/tools';

const node = toolNode('delete_data');

/** DeleteData is the Delete Data node: the pgtools tool delete_data, built from schemas/delete_data.json. */
export class DeleteData implements INodeType {
	// icon, subtitle, usableAsTool and credentials stay in this literal: the community-node lint reads them here.
	description: INodeTypeDescription = {
		...node.description,
		icon: { light: 'file:../../icons/pgtools.svg', dark: 'file:../../icons/pgtools.dark.svg' },
		subtitle: 'pgtools: delete_data',
		usableAsTool: true,
		credentials: [{ name: 'pgToolsApi', required: true, displayOptions: { show: { connection: ['http'] } } }],
	};
	execute = node.execute;
}
