import type { INodeType, INodeTypeDescription } from 'n8n-workflow';

import { toolNode } from '../../shared/tools';

const node = toolNode('explain_query');

/** ExplainQuery is the Explain Query node: the pgtools tool explain_query, built from schemas/explain_query.json. */
export class ExplainQuery implements INodeType {
	// icon, subtitle, usableAsTool and credentials stay in this literal: the community-node lint reads them here.
	description: INodeTypeDescription = {
		...node.description,
		icon: { light: 'file:../../icons/pgtools.svg', dark: 'file:../../icons/pgtools.dark.svg' },
		subtitle: 'pgtools: explain_query',
		usableAsTool: true,
		credentials: [{ name: 'pgToolsApi', required: true, displayOptions: { show: { connection: ['http'] } } }],
	};
	execute = node.execute;
}
