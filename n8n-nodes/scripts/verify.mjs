// n8n's verification rules for community packages, checked on the tarball as it is published
// (scripts/pack.mjs), offline. Two parts:
//   - scan: n8n's own scanner, @n8n/scan-community-package. Its CLI fetches the package, its
//     provenance and its attested source from the network, so its analyzePackage is called
//     directly, the way the CLI calls it: once on the tarball's compiled .js and package.json,
//     once on the sources (package.json and the node, credential and shared .ts under
//     n8n-nodes/, where the CLI's own patterns would not look: see sourcePatterns).
//   - checkPackage: the rules of n8n's verification guidelines the scanner does not check (MIT
//     licence file, English only, one service) and, again and stricter, the ones it does (no
//     runtime dependencies, no environment or file system access, imports limited to n8n-workflow
//     and the few modules n8n allows).
// Provenance cannot be checked here: it exists only once the publish workflow has run
// (.github/workflows/publish.yml). Usage: npm run build, then node n8n-nodes/scripts/verify.mjs.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

import { pack } from './pack.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

// What node code may import besides its own files: n8n-workflow (the peer dependency) and the
// modules n8n's community-node rules allow.
const allowedImports = new Set(['n8n-workflow', 'lodash', 'moment', 'p-limit', 'luxon', 'zod', 'crypto', 'node:crypto']);

// Shipped code must not reach the environment, the file system, other processes or run strings
// as code. Each pattern names the rule it breaks.
const forbiddenCode = [
	[/\bprocess\s*(\.|\[)/, 'uses process (environment variables, the process)'],
	[/\bglobalThis\b|\bglobal\s*(\.|\[)/, 'uses the global object'],
	[/\b(require|import)\s*\(?\s*['"`](node:)?(fs|fs\/promises|child_process|os|net|dgram|worker_threads|vm|v8|cluster|module)['"`]/, 'imports a module that reaches the file system, the environment or other processes'],
	[/\beval\s*\(/, 'calls eval'],
	[/\bnew\s+Function\s*\(|\bFunction\s*\(\s*['"`]/, 'builds a function from a string'],
	[/\bimport\s*\(/, 'imports dynamically'],
];

// Letters outside ASCII: the guidelines ask for English only (punctuation such as … is fine).
const nonEnglishLetter = /(?![\x00-\x7F])\p{L}/u;

const forbiddenScripts = ['preinstall', 'install', 'postinstall', 'prepare', 'preuninstall', 'uninstall', 'postuninstall'];

/** files lists every file under dir, relative to it, with / separators. */
function files(dir, base = dir) {
	return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
		if (entry.name === 'node_modules') return [];
		const path = join(dir, entry.name);
		return entry.isDirectory() ? files(path, base) : [relative(base, path).split('\\').join('/')];
	});
}

/**
 * checkPackage checks an unpacked package directory (the tarball's package/) against n8n's
 * verification rules and returns the violations, each a sentence naming the file and the rule;
 * none means it passes.
 */
export function checkPackage(dir) {
	const problems = [];
	const all = files(dir);
	let pkg;
	try {
		pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
	} catch (error) {
		return [`package.json: unreadable (${error.message})`];
	}

	if (!/^(@[a-z0-9-~][a-z0-9-._~]*\/)?n8n-nodes-[a-z0-9-._~]+$/.test(pkg.name ?? '')) problems.push(`package.json: name ${JSON.stringify(pkg.name)} must be n8n-nodes-… or @scope/n8n-nodes-…`);
	if (pkg.license !== 'MIT') problems.push(`package.json: license is ${JSON.stringify(pkg.license)}, n8n verifies only MIT`);
	const licenseFile = all.find((f) => /^licen[cs]e(\.(md|txt))?$/i.test(f));
	if (!licenseFile) problems.push('LICENSE: missing from the tarball');
	else if (!/MIT License|Permission is hereby granted, free of charge/.test(readFileSync(join(dir, licenseFile), 'utf8'))) problems.push(`${licenseFile}: not the MIT licence text`);
	for (const field of ['dependencies', 'optionalDependencies', 'bundleDependencies', 'bundledDependencies']) {
		const value = pkg[field];
		if (value && (Array.isArray(value) ? value.length : Object.keys(value).length)) problems.push(`package.json: ${field} present (${Object.keys(value).join(', ')}); a verified package has no runtime dependencies (n8n-workflow is a peer)`);
	}
	if (!pkg.peerDependencies?.['n8n-workflow']) problems.push('package.json: n8n-workflow must be a peer dependency');
	if (!pkg.keywords?.includes('n8n-community-node-package')) problems.push('package.json: keywords lack n8n-community-node-package');
	for (const script of forbiddenScripts) if (pkg.scripts?.[script]) problems.push(`package.json: scripts.${script} runs at install time`);
	if (!/github\.com[/:][^/]+\/[^/]+/.test(pkg.repository?.url ?? '')) problems.push('package.json: repository.url must name the public GitHub repository the provenance attests');
	if (pkg.n8n?.n8nNodesApiVersion !== 1) problems.push('package.json: n8n.n8nNodesApiVersion must be 1');
	if (pkg.n8n?.strict !== true) problems.push('package.json: n8n.strict must be true');
	const nodes = pkg.n8n?.nodes ?? [];
	const credentials = pkg.n8n?.credentials ?? [];
	if (nodes.length === 0) problems.push('package.json: n8n.nodes is empty');
	for (const f of [...nodes, ...credentials]) if (!all.includes(f)) problems.push(`package.json: n8n lists ${f}, which is not in the tarball`);

	for (const f of all) {
		const text = readFileSync(join(dir, f));
		if (/\.(js|cjs|mjs)$/.test(f)) {
			const code = text.toString('utf8');
			for (const [pattern, rule] of forbiddenCode) if (pattern.test(code)) problems.push(`${f}: ${rule}`);
			for (const [, name] of code.matchAll(/\brequire\s*\(\s*['"`]([^'"`]+)['"`]\s*\)/g)) {
				if (!name.startsWith('.') && !allowedImports.has(name)) problems.push(`${f}: imports ${name}, which n8n does not allow in node code`);
			}
		}
		if (/\.(js|cjs|mjs|json|md)$/.test(f)) {
			const line = text.toString('utf8').split('\n').findIndex((l) => nonEnglishLetter.test(l));
			if (line >= 0) problems.push(`${f}:${line + 1}: a letter outside English (the guidelines ask for English only)`);
		}
	}

	// One service: the package declares one credential and every node uses it and no other.
	const credentialNames = credentials
		.filter((f) => all.includes(f))
		.flatMap((f) => [...readFileSync(join(dir, f), 'utf8').matchAll(/\bthis\.name\s*=\s*['"]([^'"]+)['"]/g)].map((m) => m[1]));
	if (credentialNames.length !== 1) problems.push(`package.json: ${credentialNames.length} credentials (${credentialNames.join(', ')}); one service means one credential`);
	for (const f of nodes.filter((n) => all.includes(n))) {
		const block = /\bcredentials:\s*\[([^\]]*)\]/.exec(readFileSync(join(dir, f), 'utf8'));
		const used = block ? [...block[1].matchAll(/\bname:\s*['"]([^'"]+)['"]/g)].map((m) => m[1]) : [];
		if (used.length === 0) problems.push(`${f}: the node uses no credential`);
		for (const name of used) if (!credentialNames.includes(name)) problems.push(`${f}: uses credential ${name}, not the package's (one service per package)`);
	}
	return problems;
}

/**
 * sourcePatterns maps the files the scanner's command line lints in a package's source checkout
 * (its SOURCE_FILE_PATTERNS: package.json and {nodes,credentials}/** at the package root) to
 * where this repository keeps them: n8n-nodes/{nodes,credentials}, plus n8n-nodes/shared/, which
 * holds most of the node code. Unmapped, they would lint only package.json here.
 */
export function sourcePatterns(scannerPatterns) {
	const moved = scannerPatterns.map((p) => p.replace(/^\{nodes,credentials\}\//, 'n8n-nodes/{nodes,credentials,shared}/'));
	if (!moved.some((p) => p.startsWith('n8n-nodes/'))) {
		throw new Error(`verify: the scanner's source patterns changed (${scannerPatterns.join(', ')}); map them to n8n-nodes/ again`);
	}
	return moved;
}

/**
 * scan runs n8n's scanner (@n8n/scan-community-package) on an unpacked tarball (dir) and on
 * the sources (the repository, or a copy of it), as its CLI does once it has fetched both.
 * Returns { passed, details }.
 */
export async function scan(dir, sources = root) {
	const { analyzePackage, SOURCE_FILE_PATTERNS } = await import('@n8n/scan-community-package/scanner/scanner.mjs');
	const tarball = await analyzePackage(dir, ['**/*.js', 'package.json']);
	const source = await analyzePackage(sources, sourcePatterns(SOURCE_FILE_PATTERNS));
	return {
		passed: tarball.passed && source.passed,
		details: [
			tarball.passed ? '' : `tarball: ${tarball.message}\n${tarball.details ?? ''}`,
			source.passed ? '' : `sources: ${source.message}\n${source.details ?? ''}`,
		]
			.filter(Boolean)
			.join('\n'),
	};
}

/** unpack packs the package (pack.mjs) into a new temporary directory and returns its package/ directory. */
export function unpack() {
	const work = mkdtempSync(join(tmpdir(), 'pgtools-verify-'));
	const packed = pack(work);
	const dir = join(work, 'unpacked');
	mkdirSync(dir);
	execFileSync('tar', ['xzf', packed.path, '-C', dir]);
	return { dir: join(dir, 'package'), work, packed };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
	if (!existsSync(join(root, 'dist'))) {
		console.error('verify: no dist/; run npm run build first');
		process.exit(1);
	}
	const { dir, work } = unpack();
	try {
		const problems = checkPackage(dir);
		const scanned = await scan(dir);
		for (const p of problems) console.error(`verify: ${p}`);
		if (!scanned.passed) console.error(`verify: n8n's scanner failed:\n${scanned.details}`);
		if (problems.length || !scanned.passed) process.exit(1);
		console.log("verify: the packed package meets n8n's verification rules, and it and its sources pass n8n's scanner (provenance is the publish workflow's)");
	} finally {
		rmSync(work, { recursive: true, force: true });
	}
}
