// Drives the runner's /approvals page in a real chromium, as an approver on a phone would, and
// prints what it saw as one JSON report on stdout; runner/httpapi/approvals_browser_test.go judges it.
//
//   node check.mjs <base URL>   with PGTOOLS_APPROVALS env: {"chromium", "caller", "approver",
//                               "approve", "deny", "expire"} (tokens and request ids)
//
// The runner under test serves POST /_test/advance?seconds=N, which moves the approval
// store's clock: the request "expire" then expires without the test waiting.
import { chromium } from 'playwright-core';

const base = process.argv[2];
const cfg = JSON.parse(process.env.PGTOOLS_APPROVALS);
const report = { consoleErrors: [], foreignRequests: [], steps: [] };
const step = (name) => report.steps.push(name);

const browser = await chromium.launch({ executablePath: cfg.chromium, args: ['--no-sandbox'] });
try {
	// A phone: 390 CSS pixels wide, touch, mobile viewport meta honoured.
	const context = await browser.newContext({ viewport: { width: 390, height: 844 }, deviceScaleFactor: 3, isMobile: true, hasTouch: true });
	context.setDefaultTimeout(30000);
	const page = await context.newPage();
	page.on('console', (m) => {
		if (m.type() === 'error' || m.type() === 'warning') report.consoleErrors.push(m.text());
	});
	page.on('pageerror', (e) => report.consoleErrors.push(String(e)));
	page.on('request', (r) => {
		if (!r.url().startsWith(base + '/')) report.foreignRequests.push(r.url());
	});

	const resp = await page.goto(base + '/approvals');
	report.csp = resp.headers()['content-security-policy'] ?? '';
	report.stylesheetApplied = await page.locator('button[type=submit]').evaluate((b) => getComputedStyle(b).minHeight);
	step('sign-in form');

	// The policy holds in the browser: markup injected into the page runs no script and loads
	// nothing (the violations are reported, and set apart from the rest of the run's).
	report.injectedScriptRan = await page.evaluate(async () => {
		const s = document.createElement('script');
		s.textContent = 'window.__injected = true';
		document.body.appendChild(s);
		document.body.insertAdjacentHTML('beforeend', '<img src="/approvals/x.png"><style>body{color:red}</style>');
		await new Promise((r) => setTimeout(r, 200));
		return window.__injected === true;
	});
	report.probeViolations = report.consoleErrors.splice(0);
	await page.goto(base + '/approvals');

	// A caller's token is refused, with the reason on the page.
	await page.fill('#token', cfg.caller);
	await page.click('form.signin button[type=submit]');
	await page.locator('#message.error').waitFor();
	report.callerRefused = await page.locator('#message').innerText();
	report.callerSignedIn = (await page.locator('#approver').count()) > 0;
	step('caller refused');

	await page.fill('#token', cfg.approver);
	await page.click('form.signin button[type=submit]');
	await page.locator('#approver').waitFor();
	report.approver = await page.locator('#approver').innerText();
	step('approver signed in');

	const card = (id) => page.locator(`article[id="${id}"]`);
	report.cards = {};
	for (const id of [cfg.approve, cfg.deny, cfg.expire]) {
		const c = card(id);
		if ((await c.count()) !== 1) {
			report.cards[id] = null;
			continue;
		}
		report.cards[id] = {
			caller: await c.locator('.caller').innerText(),
			database: await c.locator('.database').innerText(),
			tables: await c.locator('tr.table td:first-child').allInnerTexts(),
			rows: await c.locator('tr.table td.rows').allInnerTexts(),
			total: await c.locator('td.total').innerText(),
			age: await c.locator('.age').innerText(),
		};
	}

	// On a 390 px wide screen nothing scrolls sideways, and the approve button lies within it.
	const button = card(cfg.approve).locator('button.approve');
	await button.scrollIntoViewIfNeeded();
	const box = await button.boundingBox();
	const size = await page.evaluate(() => ({ inner: window.innerWidth, scroll: document.documentElement.scrollWidth }));
	report.layout = { ...size, button: box, visible: await button.isVisible() };
	if (process.env.PGTOOLS_APPROVALS_SCREENSHOT) {
		// For a person to look at: PGTOOLS_APPROVALS_SCREENSHOT=/tmp/list.png go test -run InBrowser
		await page.screenshot({ path: process.env.PGTOOLS_APPROVALS_SCREENSHOT, fullPage: true });
	}
	step('list read');

	await button.click();
	await page.locator('#message.notice', { hasText: 'Approved ' + cfg.approve }).waitFor();
	report.approved = await page.locator('#message').innerText();
	report.approvedStillListed = (await card(cfg.approve).count()) > 0;
	step('approved');

	await card(cfg.deny).locator('button.deny').click();
	await page.locator('#message.notice', { hasText: 'Denied ' + cfg.deny }).waitFor();
	report.denied = await page.locator('#message').innerText();
	report.deniedStillListed = (await card(cfg.deny).count()) > 0;
	step('denied');

	// The page still shows the last request; past its time, approving it fails with the reason.
	report.expireListedBefore = (await card(cfg.expire).count()) > 0;
	const adv = await fetch(base + '/_test/advance?seconds=360', { method: 'POST' });
	if (!adv.ok) throw new Error('advancing the clock: ' + adv.status);
	await card(cfg.expire).locator('button.approve').click();
	await page.locator('#message.error').waitFor();
	report.expired = await page.locator('#message').innerText();
	report.expireListedAfter = (await card(cfg.expire).count()) > 0;
	report.emptyShown = (await page.locator('#empty').count()) > 0;
	step('expired');

	await page.click('form.signout button');
	await page.locator('#token').waitFor();
	await page.goto(base + '/approvals');
	report.signedOut = (await page.locator('#token').count()) === 1 && (await page.locator('#approver').count()) === 0;
	step('signed out');
} catch (e) {
	report.error = String(e && e.stack ? e.stack : e);
} finally {
	await browser.close();
}
process.stdout.write(JSON.stringify(report));
