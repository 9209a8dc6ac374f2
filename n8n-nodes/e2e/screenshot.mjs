// Takes n8n-nodes/docs/workflow.png, the picture in the package README: the example workflow
// examples/n8n/pgtools-session.json (an AI Agent with the eight pgtools tool nodes) in the editor of
// the real n8n make e2e installs, with the packed package installed as a community package.
//
// Not part of make e2e (it needs a browser). Run after npm run build:
//   apt-get install -y chromium
//   npm install --prefix ~/.cache/pgtools-e2e/playwright playwright-core
//   node n8n-nodes/e2e/screenshot.mjs
// PLAYWRIGHT_CORE names another playwright-core directory, CHROMIUM another browser binary.
// Everything listens on 127.0.0.1 and the browser runs without network features.
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';

import { pack } from '../scripts/pack.mjs';
import { root } from '../test/helpers.mjs';

const out = join(root, 'n8n-nodes', 'docs', 'workflow.png');
const cache = process.env.PGTOOLS_E2E_CACHE || join(homedir(), '.cache', 'pgtools-e2e');
const require = createRequire(join(process.env.PLAYWRIGHT_CORE || join(cache, 'playwright'), 'package.json'));
const { chromium } = require('playwright-core');

const [nodeDir, n8nDir] = execFileSync('bash', [join(root, '.ci', 'install-n8n.sh')], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] })
	.trim()
	.split(' ');
const work = mkdtempSync(join(tmpdir(), 'pgtools-shot-'));
const user = join(work, 'user');
const nodes = join(user, '.n8n', 'nodes');
const packed = pack(work);
const dir = join(nodes, 'node_modules', 'n8n-nodes-pgtools');
mkdirSync(dir, { recursive: true });
execFileSync('tar', ['-xzf', packed.path, '-C', dir, '--strip-components=1']);
writeFileSync(join(nodes, 'package.json'), JSON.stringify({ name: 'installed-nodes', private: true, dependencies: { 'n8n-nodes-pgtools': packed.version } }));

const freePort = async () => {
	const s = createServer();
	await new Promise((r) => s.listen(0, '127.0.0.1', r));
	const { port } = s.address();
	await new Promise((r) => s.close(r));
	return port;
};
const password = `shot-${randomBytes(8).toString('hex')}`;
const bcrypt = createRequire(join(n8nDir, 'package.json'))('bcryptjs');
const port = await freePort();
const env = {
	PATH: `${join(nodeDir, 'bin')}:${process.env.PATH}`,
	HOME: work,
	N8N_USER_FOLDER: user,
	N8N_ENCRYPTION_KEY: 'pgtools-screenshot-key-0123456789',
	N8N_LISTEN_ADDRESS: '127.0.0.1',
	N8N_PORT: String(port),
	N8N_RUNNERS_BROKER_PORT: String(await freePort()),
	N8N_RUNNERS_BROKER_LISTEN_ADDRESS: '127.0.0.1',
	N8N_RUNNERS_AUTH_TOKEN: randomBytes(16).toString('hex'),
	N8N_DIAGNOSTICS_ENABLED: 'false',
	N8N_VERSION_NOTIFICATIONS_ENABLED: 'false',
	N8N_TEMPLATES_ENABLED: 'false',
	N8N_PERSONALIZATION_ENABLED: 'false',
	N8N_DISABLED_MODULES: 'mcp-registry',
	N8N_VERIFIED_PACKAGES_ENABLED: 'false',
	N8N_REINSTALL_MISSING_PACKAGES: 'false',
	N8N_SECURE_COOKIE: 'false',
	N8N_LOG_LEVEL: 'warn',
	N8N_INSTANCE_OWNER_MANAGED_BY_ENV: 'true',
	N8N_INSTANCE_OWNER_EMAIL: 'owner@example.com',
	N8N_INSTANCE_OWNER_PASSWORD_HASH: bcrypt.hashSync(password, 10),
};
const node = join(nodeDir, 'bin', 'node');
const bin = join(n8nDir, 'node_modules', 'n8n', 'bin', 'n8n');
const n8nCli = (...args) => execFileSync(node, [bin, ...args], { env: { ...env, N8N_PORT: '0' }, stdio: ['ignore', 'ignore', 'inherit'] });

const workflow = JSON.parse(readFileSync(join(root, 'examples', 'n8n', 'pgtools-session.json'), 'utf8'));
const credentialIds = new Map();
for (const n of workflow.nodes) for (const [type, ref] of Object.entries(n.credentials ?? {})) credentialIds.set(ref.id, { ...ref, type });
const data = { pgToolsApi: { url: 'http://127.0.0.1:8080', token: 'not-used' }, openAiApi: { apiKey: 'not-used' } };
writeFileSync(join(work, 'credentials.json'), JSON.stringify([...credentialIds.values()].map((c) => ({ ...c, data: data[c.type] ?? {} }))));
writeFileSync(join(work, 'workflow.json'), JSON.stringify([workflow]));
n8nCli('import:credentials', `--input=${join(work, 'credentials.json')}`);
n8nCli('import:workflow', `--input=${join(work, 'workflow.json')}`);

const child = spawn(node, [bin, 'start'], { env, stdio: 'ignore' });
const base = `http://127.0.0.1:${port}`;
let browser;
try {
	for (const deadline = Date.now() + 120_000; !(await fetch(`${base}/healthz/readiness`).then((r) => r.ok, () => false)); ) {
		if (Date.now() > deadline || child.exitCode !== null) throw new Error('n8n did not start');
		await new Promise((r) => setTimeout(r, 500));
	}
	browser = await chromium.launch({
		executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
		args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
	});
	const context = await browser.newContext({ viewport: { width: 1280, height: 720 }, deviceScaleFactor: 1 });
	const login = await context.request.post(`${base}/rest/login`, { data: { emailOrLdapLoginId: 'owner@example.com', password } });
	if (!login.ok()) throw new Error(`login: ${login.status()}`);
	const page = await context.newPage();
	await page.goto(`${base}/workflow/${workflow.id}`);
	await page.waitForSelector('[data-test-id="canvas-node"]', { timeout: 60_000 });
	await page.waitForTimeout(3000); // icons and edges settle
	await page.keyboard.press('Escape');
	await page.keyboard.press('1'); // zoom to fit
	await page.waitForTimeout(1500);
	await page.screenshot({ path: out });
	console.log(`screenshot: ${out} (${statSync(out).size} bytes)`);
} finally {
	await browser?.close();
	child.kill('SIGTERM');
	await new Promise((r) => (child.exitCode !== null ? r() : child.on('exit', r)));
	rmSync(work, { recursive: true, force: true });
}
