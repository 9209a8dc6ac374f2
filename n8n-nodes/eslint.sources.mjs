// The community-node lint at this repository's paths. n8n's config (@n8n/node-cli's, which
// `n8n-node lint` in strict mode requires the root eslint.config.mjs to be, unchanged) scopes the
// node and credential rule sets of eslint-plugin-n8n-nodes-base to ./nodes/** and
// ./credentials/**; the sources here are under n8n-nodes/, so `n8n-node lint` applies none of
// those rules to them. This config is n8n's config plus its node and credential blocks again —
// taken from @n8n/node-cli, their rules and the rules it switches off as they are — with `files`
// moved under n8n-nodes/. The node rules also cover n8n-nodes/shared/, which holds what n8n's
// own layout keeps in each node's folder (the parameter lists the nodes share).
//
// Run by n8n-nodes/scripts/lint.mjs (npm run lint). The globs are relative to the working
// directory, as for any config ESLint is given with --config; `npx eslint -c
// n8n-nodes/eslint.sources.mjs --print-config <file>` at the root shows what applies to a file.
import { config } from '@n8n/node-cli/eslint';

// Where n8n's layout keeps nodes and credentials → where this repository keeps them.
const layout = {
	'./nodes/': ['n8n-nodes/nodes/', 'n8n-nodes/shared/'],
	'./credentials/': ['n8n-nodes/credentials/'],
};

const moved = Object.entries(layout).flatMap(([from, to]) => {
	const blocks = config.filter((block) => block.files?.some((f) => typeof f === 'string' && f.startsWith(from)));
	if (blocks.length === 0) {
		throw new Error(`eslint.sources.mjs: @n8n/node-cli's config has no block for ${from}**; see how it scopes its rule sets now`);
	}
	return blocks.map((block) => ({ ...block, files: to.flatMap((dir) => block.files.map((f) => f.replace(from, dir))) }));
});

// Where a rule misreads this package's text, and the fix it proposes would be wrong. A rule is
// switched off for one file only, each for the reason given.
const exceptions = [
	{
		// The Connection option "n8n Task Runner": n8n writes its own name in lower case; the
		// rule's title case would make it "N8n".
		files: ['n8n-nodes/shared/connection.ts'],
		rules: { 'n8n-nodes-base/node-param-display-name-miscased': 'off' },
	},
	{
		// Descriptions that quote what users type: n8n expressions ({{ $json.sessionId }},
		// {{ $json.id }}) and a field of the runner's answer (approval.id). Upper-cased ($JSON,
		// approval.ID) they would no longer work.
		files: ['n8n-nodes/shared/actAs.ts'],
		rules: { 'n8n-nodes-base/node-param-description-miscased-json': 'off' },
	},
	{
		files: ['n8n-nodes/shared/approvals.ts'],
		rules: {
			'n8n-nodes-base/node-param-description-miscased-json': 'off',
			'n8n-nodes-base/node-param-description-miscased-id': 'off',
		},
	},
];

export default [...config, ...moved, ...exceptions];
