// The community-node lint at this repository's paths (n8n-nodes/scripts/lint.mjs with
// n8n-nodes/eslint.sources.mjs): it applies to n8n-nodes/ every rule n8n's tooling applies at
// its own paths (./nodes, ./credentials), the sources pass it, and violations planted in a copy
// of the sources fail it, naming their rule.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { appendFileSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';

import { ESLint } from 'eslint';

import { configFile } from '../../scripts/lint.mjs';
import { pkg, root, sourceCopy } from '../helpers.mjs';

const lintScript = join(root, 'n8n-nodes', 'scripts', 'lint.mjs');

// Each lint run gets this long; a run that hangs fails its test instead of holding up npm test.
const runTimeout = 90_000;

/** runLint runs the lint as npm run lint does, on the package checked out in dir (default: the repository). */
function runLint(dir) {
	const run = spawnSync(process.execPath, [lintScript, ...(dir ? [dir] : [])], { cwd: root, encoding: 'utf8', timeout: runTimeout });
	assert.equal(run.error, undefined, `the lint ran (${run.error?.message})`);
	return { status: run.status, output: run.stdout + run.stderr };
}

/** enabled lists the rules a config turns on for a file path (relative to the config's base, the repository). */
async function enabled(eslint, file) {
	const { rules } = await eslint.calculateConfigForFile(file);
	return Object.keys(rules).filter((rule) => rules[rule][0] !== 0 && rules[rule][0] !== 'off');
}

const nodesBase = (rules) => rules.filter((rule) => rule.startsWith('n8n-nodes-base/'));

// Where each kind of source is here, and where n8n's layout (the one its config and scanner
// expect) would have it.
const layouts = [
	['a node', 'n8n-nodes/nodes/SelectQuery/SelectQuery.node.ts', 'nodes/SelectQuery/SelectQuery.node.ts'],
	['a credential', 'n8n-nodes/credentials/PgToolsApi.credentials.ts', 'credentials/PgToolsApi.credentials.ts'],
	["the nodes' shared code", 'n8n-nodes/shared/properties.ts', 'nodes/shared/properties.ts'],
];

describe('which rules apply', () => {
	test('n8n-node lint, with n8n\'s config, applies no n8n-nodes-base rule to the sources under n8n-nodes/ (why eslint.sources.mjs exists)', async () => {
		const n8nConfig = new ESLint({ cwd: root });
		for (const [, here] of layouts) assert.deepEqual(nodesBase(await enabled(n8nConfig, here)), [], here);
	});

	test("eslint.sources.mjs applies to each source every rule n8n's config and n8n's scanner apply to it in n8n's layout", { timeout: runTimeout }, async () => {
		const { buildScanConfig } = await import('@n8n/scan-community-package/scanner/scanner.mjs');
		const ours = new ESLint({ cwd: root, overrideConfigFile: configFile });
		const n8nConfig = new ESLint({ cwd: root });
		const scanner = new ESLint({ cwd: root, overrideConfigFile: true, overrideConfig: await buildScanConfig() });
		for (const [kind, here, there] of layouts) {
			const applied = new Set(await enabled(ours, here));
			// The scanner brings its own copy of n8n's community-node plugin: only its n8n-nodes-base rules are comparable.
			const wanted = new Set([...(await enabled(n8nConfig, there)), ...nodesBase(await enabled(scanner, there))]);
			assert.ok(nodesBase([...wanted]).length > 10, `n8n applies its n8n-nodes-base rules to ${kind} at ${there}`);
			assert.deepEqual([...wanted].filter((rule) => !applied.has(rule)), [], `rules n8n applies to ${kind} that do not apply at ${here}`);
		}
	});
});

describe('the lint', () => {
	test('is what npm run lint runs after n8n-node lint (make test-nodes and the publish workflow run npm run lint)', () => {
		assert.equal(pkg.scripts.lint, 'n8n-node lint && node n8n-nodes/scripts/lint.mjs');
	});

	test('passes the sources', { timeout: runTimeout }, () => {
		const { status, output } = runLint();
		assert.equal(status, 0, output);
	});

	test('fails violations planted in a copy of the sources, naming each rule', { timeout: runTimeout }, () => {
		const credential = 'n8n-nodes/credentials/PgToolsApi.credentials.ts';
		const node = 'n8n-nodes/nodes/SelectQuery/SelectQuery.node.ts';
		const shared = 'n8n-nodes/shared/actAs.ts';
		const before = [credential, node, shared].map((f) => readFileSync(join(root, f), 'utf8'));
		const dir = sourceCopy();
		try {
			const edit = (file, from, to) => {
				const text = readFileSync(join(dir, file), 'utf8');
				assert.ok(text.includes(from), `${file} has ${from}`);
				writeFileSync(join(dir, file), text.replace(from, to));
			};
			edit(credential, "displayName = 'Pgtools API'", "displayName = 'pgtools api'");
			appendFileSync(join(dir, node), '\nexport const home = process.env.HOME;\n');
			edit(shared, "displayName: 'Act as User'", "displayName: 'act as user'");

			const { status, output } = runLint(dir);
			assert.equal(status, 1, output);
			// ESLint's report: per file, its path on a line, then one line per problem ending in the rule.
			const flagged = (file, rule) =>
				output.split(/\n\s*\n/).some((part) => {
					const [path, ...problems] = part.trim().split('\n');
					return path.endsWith(`/${file}`) && problems.some((line) => line.trim().endsWith(rule));
				});
			for (const [file, rule] of [
				[credential, 'n8n-nodes-base/cred-class-field-display-name-miscased'],
				[node, '@n8n/community-nodes/no-restricted-globals'],
				[shared, 'n8n-nodes-base/node-param-display-name-miscased'],
			]) {
				assert.ok(flagged(file, rule), `${rule} in ${file}:\n${output}`);
			}
		} finally {
			rmSync(dir, { recursive: true, force: true });
		}
		assert.deepEqual([credential, node, shared].map((f) => readFileSync(join(root, f), 'utf8')), before, 'the sources are unchanged');
	});
});
