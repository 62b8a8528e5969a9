// Writes the third-party notice of the console's bundle: every npm package
// esbuild put into it (from esbuild's metafile, so nothing the bundle does
// not hold and nothing it holds left out), with its version, its declared
// licence and the licence files it ships. Run by scripts/console.sh:
//   node notices.mjs <metafile> <notice>
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const [metafile, notice] = process.argv.slice(2);
const meta = JSON.parse(readFileSync(metafile, 'utf8'));
// Input paths are relative to esbuild's working directory: scripts/console.sh
// runs this one in the same.
const base = process.cwd();

// The package directory of an input: up to the package after the last
// node_modules/ (a nested copy is a package of its own).
function packageDir(input) {
	const parts = input.split('/');
	const at = parts.lastIndexOf('node_modules');
	if (at < 0) return null; // the console's own source
	const len = parts[at + 1].startsWith('@') ? 3 : 2;
	return parts.slice(0, at + len).join('/');
}

function licence(pkg) {
	if (typeof pkg.license === 'string') return pkg.license;
	if (pkg.license && pkg.license.type) return pkg.license.type;
	if (Array.isArray(pkg.licenses)) return pkg.licenses.map((l) => l.type).join(' OR ');
	return 'UNKNOWN';
}

const dirs = new Set();
for (const input of Object.keys(meta.inputs)) {
	const dir = packageDir(input);
	if (dir) dirs.add(dir);
}

const entries = [];
for (const dir of dirs) {
	const abs = join(base, dir);
	const pkg = JSON.parse(readFileSync(join(abs, 'package.json'), 'utf8'));
	const files = readdirSync(abs)
		.filter((f) => /^(licen[cs]e|copying|notice)([.\-_].*)?$/i.test(f))
		.sort();
	entries.push({ pkg, files, abs });
}
entries.sort((a, b) => (a.pkg.name + '@' + a.pkg.version).localeCompare(b.pkg.name + '@' + b.pkg.version));

let out = `Third-party software in Sutra's web console (console/dist/app.js, app.css)

The console bundles the npm packages below, pinned by console/web/package-lock.json.
This notice is generated from the bundle by console/web/notices.mjs; each entry gives
the package, its version, the licence it declares and the licence files it ships.
The bpmn.io watermark in the diagrams and decision tables is kept as their licence requires.

`;
for (const { pkg, files, abs } of entries) {
	out += '='.repeat(78) + '\n';
	out += `${pkg.name}@${pkg.version}\nLicense: ${licence(pkg)}\n`;
	const home = pkg.homepage || (pkg.repository && (pkg.repository.url || pkg.repository));
	if (home) out += `Source: ${home}\n`;
	if (files.length === 0) {
		out += `(the package ships no licence file; its package.json declares ${licence(pkg)}` +
			(pkg.author ? `, author ${typeof pkg.author === 'string' ? pkg.author : pkg.author.name}` : '') + ')\n';
	}
	for (const f of files) {
		out += `\n--- ${f}\n\n` + readFileSync(join(abs, f), 'utf8').trimEnd() + '\n';
	}
	out += '\n';
}
writeFileSync(notice, out);
console.error(`notices.mjs: ${entries.length} packages in ${notice}`);
