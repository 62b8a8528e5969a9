// Preloaded (NODE_OPTIONS=--require) into every node process of a console
// build by build_test.go: records each child_process.spawn's command line in
// $SPAWN_LOG before the child starts, so the record does not race the child.
// A spawn of @ibm/telemetry-js's background process is recorded and replaced
// by an empty node, so that a failing test sends nothing to IBM.
const cp = require('node:child_process');
const fs = require('node:fs');
const { syncBuiltinESMExports } = require('node:module');

const spawn = cp.spawn;
cp.spawn = function (command, args) {
	const line = [command, ...(Array.isArray(args) ? args : [])].join(' ');
	fs.appendFileSync(process.env.SPAWN_LOG, line + '\n');
	if (line.includes('@ibm/telemetry-js')) {
		return spawn.call(this, process.execPath, ['-e', ''], { stdio: 'ignore' });
	}
	return spawn.apply(this, arguments);
};
// ES modules (telemetry-js is one) see the patched spawn only after this.
syncBuiltinESMExports();
