// What scripts/generate.mjs derives from schemas/ (the tool nodes, shared/schemaFiles.ts and
// package.json n8n.nodes) is committed as it writes it, and its check fails closed: a schema
// without its node, a node without its schema and a package.json that misses a node are each
// reported, on a copy of the checkout.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { builtInTools, generate } from '../../scripts/generate.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const script = join(root, 'n8n-nodes', 'scripts', 'generate.mjs');

test('the tool nodes, shared/schemaFiles.ts and package.json n8n.nodes are what scripts/generate.mjs writes', () => {
	execFileSync(process.execPath, [script, '--check'], { stdio: 'pipe' });
});

test('the tools are the schema files but the config schema, in their x-pgtools order', () => {
	const tools = builtInTools();
	assert.equal(tools[0].tool, 'select_query');
	assert.deepEqual(tools.map((t) => t.order), tools.map((t) => t.order).sort((a, b) => a - b));
	assert.ok(!tools.some((t) => t.file === 'config.schema.json'));
	const sql = tools.find((t) => t.tool === 'execute_sql');
	assert.deepEqual([sql.className, sql.typeName], ['ExecuteSql', 'executeSql']);
});

// checkout copies what generate.mjs reads and writes into a temporary directory.
function checkout(t) {
	const dir = mkdtempSync(join(tmpdir(), 'pgtools-generate-'));
	t.after(() => rmSync(dir, { recursive: true, force: true }));
	for (const path of ['schemas', 'n8n-nodes/nodes', 'n8n-nodes/shared/schemaFiles.ts', 'package.json']) {
		cpSync(join(root, path), join(dir, path), { recursive: true });
	}
	return dir;
}

function addSchema(dir, tool, displayName, order) {
	const schema = JSON.parse(readFileSync(join(dir, 'schemas', 'explain_query.json'), 'utf8'));
	Object.assign(schema['x-pgtools'], { name: tool, order, displayName, nodeAlias: ['new'] });
	writeFileSync(join(dir, 'schemas', `${tool}.json`), JSON.stringify(schema, null, 2));
}

test('a schema without its node fails the check; generate writes the node and registers it in canonical order', (t) => {
	const dir = checkout(t);
	// Between the first two tools (the files leave gaps between orders).
	const [first, second] = builtInTools(dir);
	addSchema(dir, 'planted_tool', 'Planted Tool', first.order + 1);
	assert.deepEqual(generate(dir, { check: true }).sort(), [
		'n8n-nodes/nodes/PlantedTool/PlantedTool.node.json is missing',
		'n8n-nodes/nodes/PlantedTool/PlantedTool.node.ts is missing',
		'n8n-nodes/shared/schemaFiles.ts is out of date',
		'package.json is out of date',
	]);
	assert.deepEqual(generate(dir), []);
	assert.deepEqual(generate(dir, { check: true }), []);
	const source = readFileSync(join(dir, 'n8n-nodes/nodes/PlantedTool/PlantedTool.node.ts'), 'utf8');
	assert.match(source, /toolNode\('planted_tool'\)/);
	assert.match(source, /export class PlantedTool implements INodeType/);
	const codex = JSON.parse(readFileSync(join(dir, 'n8n-nodes/nodes/PlantedTool/PlantedTool.node.json'), 'utf8'));
	assert.equal(codex.node, 'n8n-nodes-pgtools.plantedTool');
	assert.deepEqual(codex.alias, ['postgres', 'sql', 'new']);
	const nodes = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')).n8n.nodes.map((f) => f.split('/').at(-2));
	assert.deepEqual(nodes.slice(0, 3), [first.className, 'PlantedTool', second.className]);
	assert.deepEqual(nodes.slice(-2), ['CustomTool', 'PgtoolsApproval'], 'the hand-written nodes follow the tool nodes');
	assert.match(readFileSync(join(dir, 'n8n-nodes/shared/schemaFiles.ts'), 'utf8'), /import plantedTool from '\.\.\/\.\.\/schemas\/planted_tool\.json';[\s\S]*\tplanted_tool: plantedTool,/);
});

test('a generated node whose schema is gone fails the check; generate removes it', (t) => {
	const dir = checkout(t);
	rmSync(join(dir, 'schemas', 'explain_query.json'));
	assert.deepEqual(generate(dir, { check: true }).sort(), [
		'n8n-nodes/nodes/ExplainQuery is the node of a tool schemas/ no longer has',
		'n8n-nodes/shared/schemaFiles.ts is out of date',
		'package.json is out of date',
	]);
	assert.deepEqual(generate(dir), []);
	assert.ok(!existsSync(join(dir, 'n8n-nodes/nodes/ExplainQuery')));
	assert.ok(!readFileSync(join(dir, 'package.json'), 'utf8').includes('ExplainQuery'));
});

test('package.json without a node, or with one too many, fails the check', (t) => {
	const dir = checkout(t);
	const file = join(dir, 'package.json');
	const pkg = JSON.parse(readFileSync(file, 'utf8'));
	for (const nodes of [pkg.n8n.nodes.filter((f) => !f.includes('ExplainQuery')), [...pkg.n8n.nodes, 'dist/n8n-nodes/nodes/Gone/Gone.node.js']]) {
		writeFileSync(file, `${JSON.stringify({ ...pkg, n8n: { ...pkg.n8n, nodes } }, null, 2)}\n`);
		assert.deepEqual(generate(dir, { check: true }), ['package.json is out of date']);
	}
});

test('a hand-written node is registered and left alone; a node folder without its source is an error', (t) => {
	const dir = checkout(t);
	mkdirSync(join(dir, 'n8n-nodes/nodes/Another'));
	writeFileSync(join(dir, 'n8n-nodes/nodes/Another/Another.node.ts'), '// written by hand\n');
	assert.deepEqual(generate(dir), []);
	assert.equal(readFileSync(join(dir, 'n8n-nodes/nodes/Another/Another.node.ts'), 'utf8'), '// written by hand\n');
	assert.ok(JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')).n8n.nodes.includes('dist/n8n-nodes/nodes/Another/Another.node.js'));
	mkdirSync(join(dir, 'n8n-nodes/nodes/Empty'));
	assert.throws(() => generate(dir, { check: true }), /n8n-nodes\/nodes\/Empty has no Empty\.node\.ts/);
});

test('a schema without the metadata the nodes need fails, naming the file', (t) => {
	const dir = checkout(t);
	const file = join(dir, 'schemas', 'pg_tx.json');
	const schema = JSON.parse(readFileSync(file, 'utf8'));
	delete schema['x-pgtools'].order;
	writeFileSync(file, JSON.stringify(schema));
	assert.throws(() => generate(dir, { check: true }), /schemas\/pg_tx\.json: x-pgtools needs/);
});
