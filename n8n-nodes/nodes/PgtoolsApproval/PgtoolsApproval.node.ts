import type { INodeType, INodeTypeDescription } from 'n8n-workflow';
import { NodeConnectionTypes } from 'n8n-workflow';

import { approvalProperties, executeApproval } from '../../shared/approvals';

/**
 * PgtoolsApproval is the Pgtools Approval node: a person's review step lists, reads, approves or
 * denies the runner's approval requests (policy.require_approval) with an approver's credential.
 */
export class PgtoolsApproval implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'Pgtools Approval',
		name: 'pgtoolsApproval',
		icon: { light: 'file:../../icons/pgtools.svg', dark: 'file:../../icons/pgtools.dark.svg' },
		group: ['transform'],
		version: 1,
		subtitle: '={{ "pgtools: " + $parameter["operation"] }}',
		description: 'List, read, approve or deny the pgtools approval requests a person must decide (approver token)',
		defaults: { name: 'Pgtools Approval' },
		inputs: [NodeConnectionTypes.Main],
		outputs: [NodeConnectionTypes.Main],
		// Never a tool: an AI Agent must not decide its own approval requests. Stated (as not set)
		// because the community-node lint asks every node to say; n8n makes a tool only of true.
		usableAsTool: undefined,
		credentials: [{ name: 'pgToolsApi', required: true }],
		properties: approvalProperties,
	};

	execute = executeApproval;
}
