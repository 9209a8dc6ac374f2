// How a node reaches pgtools: over HTTP with the pgtools API credential (the default), or
// through n8n's task broker to a `pgtools serve --n8n-broker`, which needs no credential
// because pgtools dials out to n8n.
import type { INodeProperties } from 'n8n-workflow';

/** Connection is the value of a node's Connection parameter. */
export type Connection = 'http' | 'taskRunner';

/** taskType is the n8n task type that `pgtools serve --n8n-broker` registers for. */
export const taskType = 'pgtools';

/** brokerCommand is what a builder runs to serve the task type; it is named in the editor and in errors. */
export const brokerCommand = 'pgtools serve --n8n-broker http://127.0.0.1:5679';

/**
 * connectionProperties come first on every node: the Connection choice, and for the task
 * runner a notice of what must run beside n8n. The pgtools API credential is declared with
 * displayOptions on connection, so it is asked for only with the HTTP connection.
 */
export const connectionProperties: INodeProperties[] = [
	{
		displayName: 'Connection',
		name: 'connection',
		type: 'options',
		noDataExpression: true,
		options: [
			{
				name: 'Runner HTTP API',
				value: 'http',
				description: 'Call pgtools serve over HTTP with a pgtools API credential (URL and token)',
			},
			{
				name: 'n8n Task Runner',
				value: 'taskRunner',
				description:
					'Send the call through n8n\'s task broker to a pgtools serve started with --n8n-broker: no credential (self-hosted n8n only)',
			},
		],
		default: 'http',
		description: 'How this node reaches pgtools. Both return the same answers.',
	},
	{
		displayName: `Needs pgtools running beside n8n as a task runner: <code>${brokerCommand}</code>, with N8N_RUNNERS_AUTH_TOKEN set to the same value for n8n and pgtools. Calls run as the runner's broker principal (read and write), or, with Act as User set and pgtools started with --n8n-act-as, as that user.`,
		name: 'taskRunnerNotice',
		type: 'notice',
		default: '',
		displayOptions: { show: { connection: ['taskRunner'] } },
	},
];
