// The community-node lint on the node, credential and shared sources where this repository keeps
// them (n8n-nodes/eslint.sources.mjs says why `n8n-node lint` alone is not enough here). npm run
// lint runs `n8n-node lint` (its strict check of eslint.config.mjs, and n8n's config on the whole
// package) and then this. Usage: node n8n-nodes/scripts/lint.mjs [dir] — dir is a checkout of
// the package, the repository by default; exits 1 on any problem, a warning too.
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { ESLint } from 'eslint';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** configFile is the ESLint config this lint applies. */
export const configFile = join(root, 'n8n-nodes', 'eslint.sources.mjs');

/** sourceDirs are the directories linted, relative to the package root. */
export const sourceDirs = ['n8n-nodes/nodes', 'n8n-nodes/credentials', 'n8n-nodes/shared'];

/**
 * lint lints the sources of the package checked out in dir and returns { passed, report }:
 * passed is false on any error or warning, report is ESLint's stylish report (empty when clean).
 */
export async function lint(dir = root) {
	const eslint = new ESLint({ cwd: resolve(dir), overrideConfigFile: configFile });
	const results = await eslint.lintFiles(sourceDirs);
	const problems = results.reduce((n, r) => n + r.errorCount + r.warningCount, 0);
	const report = await (await eslint.loadFormatter('stylish')).format(results);
	return { passed: problems === 0, files: results.length, report };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
	const { passed, files, report } = await lint(process.argv[2]);
	if (!passed) {
		console.error(report);
		process.exit(1);
	}
	console.log(`lint: ${files} files in ${sourceDirs.join(', ')} pass n8n's node, credential and community-node rules`);
}
