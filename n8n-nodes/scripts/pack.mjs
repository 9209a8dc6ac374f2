// Packs the package as it is published. Not a plain `npm pack` at the root: npm always ships the
// README.md beside package.json, and the root's is the project's, while npm and n8n's community
// node listing show the package's own (n8n-nodes/README.md: setup in n8n terms). So the
// published files are staged in a temporary directory with that README and packed from there.
// Run `npm run build` first. Usage: node n8n-nodes/scripts/pack.mjs [destination dir]; prints
// the tarball's path. The publish workflow (.github/workflows/publish.yml) publishes its output.
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/**
 * packageReadme is n8n-nodes/README.md with its relative links made relative to the package
 * root, where the shipped README sits (they are relative to n8n-nodes/ so it reads right on GitHub).
 */
export function packageReadme() {
	const text = readFileSync(join(root, 'n8n-nodes', 'README.md'), 'utf8');
	return text.replace(/\]\((?!https?:|#|\/)([^)\s]+)\)/g, '](n8n-nodes/$1)');
}

/**
 * pack stages the files package.json names, LICENSE and the package README, packs them into
 * destination and returns npm's description of the tarball ({filename, files, ...}) with the
 * tarball's absolute path as path.
 */
export function pack(destination) {
	const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
	const stage = mkdtempSync(join(tmpdir(), 'pgtools-pack-'));
	try {
		for (const entry of ['package.json', 'LICENSE', ...pkg.files]) {
			const from = join(root, entry);
			if (!existsSync(from)) throw new Error(`pack: ${entry} is missing (run npm run build first)`);
			mkdirSync(dirname(join(stage, entry)), { recursive: true });
			cpSync(from, join(stage, entry), { recursive: true });
		}
		writeFileSync(join(stage, 'README.md'), packageReadme());
		mkdirSync(destination, { recursive: true });
		const out = execFileSync('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', resolve(destination)], {
			cwd: stage,
			encoding: 'utf8',
			stdio: ['ignore', 'pipe', 'inherit'],
		});
		const [packed] = JSON.parse(out);
		return { ...packed, path: join(resolve(destination), packed.filename) };
	} finally {
		rmSync(stage, { recursive: true, force: true });
	}
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
	console.log(pack(process.argv[2] ?? root).path);
}
