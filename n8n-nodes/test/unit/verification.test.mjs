// n8n's verification rules on the tarball as published (scripts/verify.mjs): the package passes
// them and n8n's own scanner (on the tarball and on the sources under n8n-nodes/), and each rule
// catches its violation when one is planted in a copy.
import assert from 'node:assert/strict';
import { appendFileSync, cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { packageReadme } from '../../scripts/pack.mjs';
import { checkPackage, scan, sourcePatterns, unpack } from '../../scripts/verify.mjs';
import { pkg, require, root, sourceCopy } from '../helpers.mjs';

let packed;
before(() => {
	packed = unpack();
});
after(() => rmSync(packed.work, { recursive: true, force: true }));

const node = (name) => pkg.n8n.nodes.find((f) => f.includes(`/${name}/`));

// plant copies the unpacked package, changes the copy and returns it.
function plant(change) {
	const dir = mkdtempSync(join(tmpdir(), 'pgtools-planted-'));
	cpSync(packed.dir, dir, { recursive: true });
	change(dir);
	return dir;
}
const editJson = (dir, f) => {
	const data = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
	f(data);
	writeFileSync(join(dir, 'package.json'), JSON.stringify(data));
};
const edit = (dir, file, f) => writeFileSync(join(dir, file), f(readFileSync(join(dir, file), 'utf8')));

describe('the published tarball', () => {
	test('meets every rule checkPackage checks', () => {
		assert.deepEqual(checkPackage(packed.dir), []);
	});

	test("passes n8n's scanner (@n8n/scan-community-package) on the tarball and on the sources", async () => {
		const result = await scan(packed.dir);
		assert.equal(result.passed, true, result.details);
	});

	test('ships the package README, not the project one, with links that resolve from the package root', () => {
		const shipped = readFileSync(join(packed.dir, 'README.md'), 'utf8');
		assert.equal(shipped, packageReadme());
		assert.notEqual(shipped, readFileSync(join(root, 'README.md'), 'utf8'));
		for (const [, target] of shipped.matchAll(/\]\((?!https?:|#)([^)\s]+)\)/g)) {
			assert.ok(packed.packed.files.some((f) => f.path === target), `${target}, linked from the README, is in the tarball`);
		}
	});
});

describe('each rule catches its violation', () => {
	const planted = [
		['process.env in node code', (d) => appendFileSync(join(d, node('SelectQuery')), '\nconst home = process.env.HOME;\n'), /SelectQuery.node.js: uses process/],
		['the file system', (d) => appendFileSync(join(d, 'dist/n8n-nodes/shared/json.js'), "\nconst fs = require('node:fs');\n"), /json.js: imports a module that reaches the file system/],
		['fs/promises', (d) => appendFileSync(join(d, 'dist/n8n-nodes/shared/json.js'), "\nconst fsp = require('fs/promises');\n"), /json.js: imports a module/],
		['child_process', (d) => appendFileSync(join(d, 'dist/n8n-nodes/shared/runner.js'), "\nrequire('child_process');\n"), /runner.js: imports a module/],
		['eval', (d) => appendFileSync(join(d, 'dist/n8n-nodes/shared/runner.js'), "\neval('1');\n"), /runner.js: calls eval/],
		['new Function', (d) => appendFileSync(join(d, 'dist/n8n-nodes/shared/runner.js'), "\nnew Function('return 1');\n"), /runner.js: builds a function from a string/],
		['an import n8n does not allow', (d) => appendFileSync(join(d, 'dist/n8n-nodes/shared/runner.js'), "\nrequire('axios');\n"), /runner.js: imports axios/],
		['a runtime dependency', (d) => editJson(d, (p) => (p.dependencies = { axios: '1.0.0' })), /dependencies present \(axios\)/],
		['another licence', (d) => editJson(d, (p) => (p.license = 'Apache-2.0')), /license is "Apache-2.0"/],
		['no LICENSE file', (d) => rmSync(join(d, 'LICENSE')), /LICENSE: missing/],
		['no community keyword', (d) => editJson(d, (p) => (p.keywords = ['n8n'])), /keywords lack n8n-community-node-package/],
		['a wrong package name', (d) => editJson(d, (p) => (p.name = 'pgtools-nodes')), /name "pgtools-nodes"/],
		['an install script', (d) => editJson(d, (p) => (p.scripts = { postinstall: 'node x.js' })), /scripts.postinstall/],
		['a node missing from the tarball', (d) => rmSync(join(d, node('DeleteData'))), /DeleteData.node.js, which is not in the tarball/],
		['a non-English display name', (d) => edit(d, node('SelectQuery'), (s) => s.replace("subtitle: 'pgtools: select_query'", "subtitle: 'pgtools: Abfrage ausführen'")), /SelectQuery.node.js:\d+: a letter outside English/],
		['a second service', (d) => edit(d, node('InsertData'), (s) => s.replace("name: 'pgToolsApi'", "name: 'slackApi'")), /InsertData.node.js: uses credential slackApi/],
		['no peer n8n-workflow', (d) => editJson(d, (p) => delete p.peerDependencies), /n8n-workflow must be a peer dependency/],
	];
	for (const [name, change, want] of planted) {
		test(name, () => {
			const dir = plant(change);
			try {
				const problems = checkPackage(dir);
				assert.ok(problems.some((p) => want.test(p)), `${want} among ${JSON.stringify(problems)}`);
			} finally {
				rmSync(dir, { recursive: true, force: true });
			}
		});
	}

	test("n8n's scanner itself fails a planted environment read and the legacy request helper", async () => {
		const dir = plant((d) => {
			appendFileSync(join(d, node('SelectQuery')), '\nconst home = process.env.HOME;\n');
			appendFileSync(join(d, 'dist/n8n-nodes/shared/runner.js'), '\nasync function legacy() { return await this.helpers.request({ uri: "http://x" }); }\nexports.legacy = legacy;\n');
		});
		try {
			const result = await scan(dir);
			assert.equal(result.passed, false);
			assert.match(result.details, /no-restricted-globals/);
			assert.match(result.details, /no-deprecated-workflow-functions/);
		} finally {
			rmSync(dir, { recursive: true, force: true });
		}
	});

	test("n8n's scanner fails violations planted in the sources under n8n-nodes/, which its own patterns would not read", async () => {
		const sources = sourceCopy();
		try {
			edit(sources, 'n8n-nodes/credentials/PgToolsApi.credentials.ts', (s) => s.replace("displayName = 'Pgtools API'", "displayName = 'pgtools api'"));
			appendFileSync(join(sources, 'n8n-nodes/nodes/SelectQuery/SelectQuery.node.ts'), '\nexport const home = process.env.HOME;\n');
			const result = await scan(packed.dir, sources);
			assert.equal(result.passed, false);
			assert.match(result.details, /^sources: /m);
			assert.doesNotMatch(result.details, /^tarball: /m);
			assert.match(result.details, /PgToolsApi\.credentials\.ts\n(.*\n)*?.*n8n-nodes-base\/cred-class-field-display-name-miscased/);
			assert.match(result.details, /SelectQuery\.node\.ts\n(.*\n)*?.*no-restricted-globals/);
		} finally {
			rmSync(sources, { recursive: true, force: true });
		}
	});
});

test("the scanner's source patterns, moved to n8n-nodes/, read every node, credential and shared source", async () => {
	const { SOURCE_FILE_PATTERNS } = await import('@n8n/scan-community-package/scanner/scanner.mjs');
	// The files as the scanner selects them: with its own fast-glob.
	const glob = createRequire(require.resolve('@n8n/scan-community-package/package.json'))('fast-glob');
	const read = glob.sync(sourcePatterns(SOURCE_FILE_PATTERNS), { cwd: root, ignore: ['node_modules/**'] });
	const sources = ['package.json', ...pkg.n8n.credentials, ...pkg.n8n.nodes].map((f) => f.replace(/^dist\//, '').replace(/\.js$/, '.ts'));
	for (const file of [...sources, 'n8n-nodes/shared/runner.ts']) assert.ok(read.includes(file), `${file} among ${read.join(', ')}`);
});

// The workflow cannot run here; what n8n requires of it is checked in its text.
test('the publish workflow publishes a tag with npm provenance, after the lint, the verification and the unit tests', () => {
	const yml = readFileSync(join(root, '.github', 'workflows', 'publish.yml'), 'utf8');
	const steps = yml.split('\n').filter((l) => /^\s+(- )?run:|^\s{10}\S/.test(l)).join('\n');
	assert.match(yml, /^on:\n {2}push:\n {4}tags: \['v\*'\]$/m);
	assert.match(yml, /^permissions:\n {2}contents: read\n {2}id-token: write\b/m);
	assert.match(yml, /node-version: 24\b/, 'npm 11 for trusted publishing');
	const order = ['npm ci', 'npm run build', 'npm run lint', 'npm run verify', 'n8n-nodes/test/unit', 'scripts/pack.mjs', 'npm publish "$tarball" --provenance --access public'];
	let at = -1;
	for (const step of order) {
		const i = steps.indexOf(step);
		assert.ok(i > at, `${step} runs, after ${order[order.indexOf(step) - 1] ?? 'checkout'}`);
		at = i;
	}
	assert.doesNotMatch(yml, /registry-url|npmjs\.(org|com)|NPM_TOKEN/, 'no registry host or long-lived token');
});

