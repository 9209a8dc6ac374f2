// Builds the package into dist/: a check that the files generate.mjs derives from schemas/ (the
// tool nodes, shared/schemaFiles.ts, package.json n8n.nodes) are current, a strict tsc compile
// (the nodes import schemas/*.json, which tsc copies to dist/schemas/), then the icons and the
// codex files n8n reads beside each node. Plain node + tsc rather than `n8n-node build`, whose
// asset copy would pick up stray SVGs from anywhere in the repository.
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

import { generate } from './generate.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const src = join(root, 'n8n-nodes');
const dist = join(root, 'dist');

// A package built from stale generated files would lack a tool, or keep one schemas/ dropped.
const stale = generate(root, { check: true });
if (stale.length > 0) {
	console.error(`build: ${stale.join('; ')}: run npm run generate and commit what it writes`);
	process.exit(1);
}

rmSync(dist, { recursive: true, force: true });
try {
	execFileSync(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(root, 'tsconfig.json')], {
		stdio: 'inherit',
	});
} catch {
	console.error('build: tsc failed');
	process.exit(1);
}

const assets = [
	...walk(join(src, 'icons')).filter((f) => f.endsWith('.svg')),
	...walk(join(src, 'nodes')).filter((f) => f.endsWith('.node.json')),
];
for (const file of assets) {
	const target = join(dist, relative(root, file));
	mkdirSync(dirname(target), { recursive: true });
	cpSync(file, target);
}
console.log(`build: dist/ ready (${assets.length} assets)`);

function walk(dir) {
	return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
		entry.isDirectory() ? walk(join(dir, entry.name)) : [join(dir, entry.name)],
	);
}
