#!/usr/bin/env node
// Static checks of the KJit Julia package, for machines without a Julia runtime.
//
//   node check.js --headers <include/kjit dir> --lib <libkjit.so> --src <bindings/julia>
//
// 1. Every .jl file under --src parses with tree-sitter-julia: no ERROR or MISSING node.
// 2. Every `ccall((:sym, libkjit), Ret, (T1, ...), a1, ...)` names a symbol that
//    `nm -D --defined-only` finds exported by --lib and that a header declares; its
//    argument-type tuple has as many entries as the C prototype has parameters, with
//    types compatible with the C types (and so does the return type); it passes as many
//    values as it declares types. Every function declared with KJIT_EXPORT in the
//    headers is called by at least one ccall.
// 3. Every C struct in the headers has a Julia `struct` of the same name with the same
//    fields, in the same order, with compatible types (same layout).
// 4. GC safety (blocking.json): every ccall of a function that can block is written
//    `@gcsafe ccall(...)`, the `@gcsafe` macro brackets the call with jl_gc_safe_enter /
//    jl_gc_safe_leave, and no function that runs Julia callbacks on the calling thread is
//    called GC-safe. The only other ccalls allowed are of the few runtime functions in
//    RUNTIME_CCALLS.
// 5. Foreign threads: the @cfunction handed to kjit_set_log_callback only queues the
//    message and wakes a Julia task with uv_async_send (no strings, no user code, no
//    exceptions on kjit's threads).
// 6. Streams: the package declares CUDA.jl as a weak dependency with an extension (whose
//    file exists), so that `launch` without `stream=` uses CUDA.jl's task-local stream.
// 7. Constants: every `const KJIT_X = <integer>` in the package has the value the headers
//    give the enumerator or #define KJIT_X.
//
// Exit status 0 when everything holds, 1 with a list of problems otherwise.
'use strict';

const fs = require('fs');
const path = require('path');
const { execFileSync } = require('child_process');
const Parser = require('tree-sitter');
const Julia = require('tree-sitter-julia');

function parseArgs(argv) {
  const args = {};
  for (let i = 2; i < argv.length; i += 2) {
    const k = argv[i];
    if (!k.startsWith('--') || i + 1 >= argv.length) usage();
    args[k.slice(2)] = argv[i + 1];
  }
  if (!args.headers || !args.lib || !args.src) usage();
  return args;
}

function usage() {
  console.error('usage: node check.js --headers <include/kjit> --lib <libkjit.so> --src <bindings/julia>');
  process.exit(2);
}

// ccalls of the Julia runtime and libc that the package may make besides libkjit's.
const RUNTIME_CCALLS = new Set(['jl_gc_safe_enter', 'jl_gc_safe_leave', 'uv_async_send', 'strlen']);
const BLOCKING = JSON.parse(fs.readFileSync(path.join(__dirname, 'blocking.json'), 'utf8'));
const CUDA_UUID = '052768ef-5323-5732-b1bb-66c8b64840ba';

const problems = [];
function problem(msg) {
  problems.push(msg);
}

// ---- C headers ------------------------------------------------------------------------------

function stripC(text) {
  text = text.replace(/\/\*[\s\S]*?\*\//g, ' ');
  text = text.replace(/\/\/[^\n]*/g, ' ');
  // Preprocessor lines, including continued ones.
  text = text.replace(/^[ \t]*#(?:[^\n]*\\\n)*[^\n]*$/gm, ' ');
  return text;
}

// "const kjit_options* const* opts" -> { base: 'kjit_options', depth: 2, name: 'opts' }
function parseCDecl(decl, withName) {
  let d = decl.replace(/\s+/g, ' ').trim();
  let name = null;
  let arr = null;
  if (withName) {
    const m = d.match(/^(.*?)\b([A-Za-z_]\w*)\s*(?:\[(\d+)\])?$/);
    if (!m) throw new Error(`cannot parse C declaration "${decl}"`);
    d = m[1];
    name = m[2];
    arr = m[3] ? Number(m[3]) : null;
  }
  const depth = (d.match(/\*/g) || []).length + (arr !== null && withName === 'param' ? 1 : 0);
  const words = d.replace(/\*/g, ' ').split(' ').filter((w) => w && w !== 'const');
  if (words.length !== 1) throw new Error(`cannot parse C type "${decl}"`);
  return { base: words[0], depth, name, arr: withName === 'field' ? arr : null, text: decl.trim() };
}

// KJIT_ enumerators and #defines of the headers: name -> value, or null where the value is
// an expression (e.g. KJIT_VERSION); an enumerator without "=" counts on from the last.
function readConstants(dir) {
  const values = new Map();
  for (const f of fs.readdirSync(dir).filter((x) => x.endsWith('.h'))) {
    const raw = fs.readFileSync(path.join(dir, f), 'utf8');
    const text = stripC(raw);
    const noComments = raw.replace(/\/\*[\s\S]*?\*\//g, ' ').replace(/\/\/[^\n]*/g, ' ');
    const dre = /^\s*#\s*define\s+(KJIT_\w+)[ \t]+(.+)$/gm;
    let m;
    while ((m = dre.exec(noComments))) {
      const v = m[2].trim();
      values.set(m[1], /^-?\d+$/.test(v) ? Number(v) : null);
    }
    const ere = /enum\s*\w*\s*\{([^}]*)\}/g;
    while ((m = ere.exec(text))) {
      let next = 0;
      for (const item of m[1].split(',')) {
        const im = item.trim().match(/^(KJIT_\w+)\s*(?:=\s*(.+))?$/);
        if (!im) continue;
        const v = im[2] === undefined ? next : (/^-?\d+$/.test(im[2].trim()) ? Number(im[2].trim()) : null);
        values.set(im[1], v);
        next = v === null ? 0 : v + 1;
      }
    }
  }
  return values;
}

function readHeaders(dir) {
  const funcs = new Map();
  const structs = new Map();
  const files = fs.readdirSync(dir).filter((f) => f.endsWith('.h')).sort();
  if (files.length === 0) problem(`no headers in ${dir}`);
  for (const f of files) {
    const text = stripC(fs.readFileSync(path.join(dir, f), 'utf8'));
    const fre = /KJIT_EXPORT\s+([^;(]+?)\s*\b(kjit_\w+)\s*\(([^)]*)\)\s*;/g;
    let m;
    while ((m = fre.exec(text))) {
      const ret = parseCDecl(m[1], null);
      const rawParams = m[3].trim();
      const params = rawParams === '' || rawParams === 'void'
        ? []
        : rawParams.split(',').map((p) => parseCDecl(p, 'param'));
      funcs.set(m[2], { file: f, ret, params, proto: `${m[1].trim()} ${m[2]}(${rawParams})` });
    }
    const sre = /typedef\s+struct\s+(kjit_\w+)\s*\{([\s\S]*?)\}\s*(\w+)\s*;/g;
    while ((m = sre.exec(text))) {
      const fields = [];
      for (let decl of m[2].split(';')) {
        decl = decl.replace(/\s+/g, ' ').trim();
        if (!decl) continue;
        // "int64_t m, n, k" declares three fields of one type.
        const tm = decl.match(/^((?:const\s+)?\w+(?:\s*\*)*)\s+(.*)$/);
        if (!tm) throw new Error(`cannot parse field "${decl}" of ${m[3]}`);
        for (let n of tm[2].split(',')) {
          n = n.trim();
          let stars = '';
          while (n.startsWith('*')) {
            stars += '*';
            n = n.slice(1).trim();
          }
          fields.push(parseCDecl(`${tm[1]}${stars} ${n}`, 'field'));
        }
      }
      structs.set(m[3], { file: f, fields });
    }
  }
  return { funcs, structs };
}

// ---- C -> Julia type compatibility ----------------------------------------------------------

const SCALARS = {
  void: ['Cvoid', 'Nothing'],
  char: ['Cchar', 'Int8', 'UInt8'],
  int: ['Cint', 'Int32'],
  unsigned: ['Cuint', 'UInt32'],
  size_t: ['Csize_t', 'UInt', 'UInt64'],
  int64_t: ['Int64', 'Clonglong'],
  uint64_t: ['UInt64', 'Culonglong'],
  int32_t: ['Int32', 'Cint'],
  uint32_t: ['UInt32', 'Cuint'],
  double: ['Cdouble', 'Float64'],
  float: ['Cfloat', 'Float32'],
  kjit_status: ['Cint', 'Int32'],
};
const FN_POINTERS = new Set(['kjit_log_fn', 'kjit_cache_list_fn']);
const HANDLES = new Set(['kjit_cache', 'kjit_options', 'kjit_compiler', 'kjit_binary', 'kjit_future',
  'kjit_kernel', 'kjit_gemm', 'kjit_grouped_gemm', 'kjit_linker', 'kjit_source']);

// Julia types (without spaces) acceptable for a C type in a ccall (`where` = 'arg' | 'ret') or
// a struct field ('field').
function allowedJulia(c, structs, where) {
  const { base, depth } = c;
  const refOk = where === 'arg';
  const ptrs = (inner) => {
    const out = inner.map((t) => `Ptr{${t}}`);
    if (refOk) out.push(...inner.map((t) => `Ref{${t}}`));
    return out;
  };
  if (FN_POINTERS.has(base)) return depth === 0 ? ['Ptr{Cvoid}'] : ptrs(['Ptr{Cvoid}']);
  if (depth === 0) {
    if (c.arr !== null && where === 'field') {
      return (SCALARS[base] || []).map((t) => `NTuple{${c.arr},${t}}`);
    }
    return SCALARS[base] || [];
  }
  let inner;
  if (base === 'char') inner = ['UInt8', 'Cchar', 'Int8'];
  else if (base === 'void') inner = ['Cvoid', 'UInt8'];
  else if (HANDLES.has(base)) inner = ['Cvoid', base];
  else if (structs.has(base)) inner = [base];
  else if (SCALARS[base]) inner = SCALARS[base];
  else return [];
  if (depth === 1) {
    const out = ptrs(inner);
    if (base === 'char' && where === 'arg') out.push('Cstring');
    if (base === 'char' && where !== 'arg') out.push('Cstring');
    return out;
  }
  if (depth === 2) {
    const firstLevel = inner.map((t) => `Ptr{${t}}`);
    if (base === 'char') firstLevel.push('Cstring');
    return ptrs(firstLevel);
  }
  return [];
}

// ---- Julia sources ----------------------------------------------------------------------------

function findJl(dir) {
  const out = [];
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...findJl(p));
    else if (e.name.endsWith('.jl')) out.push(p);
  }
  return out.sort();
}

function* walk(node) {
  yield node;
  for (const c of node.children) yield* walk(c);
}

function where(file, node) {
  return `${file}:${node.startPosition.row + 1}:${node.startPosition.column + 1}`;
}

const norm = (s) => s.replace(/\s+/g, '');

// True when a ccall node is the argument of `@gcsafe`.
function isGcSafe(node) {
  const list = node.parent;
  const mc = list && list.parent;
  if (!list || list.type !== 'macro_argument_list' || !mc || mc.type !== 'macrocall_expression') return false;
  const id = mc.namedChildren.find((c) => c.type === 'macro_identifier');
  return !!id && id.text === '@gcsafe' && list.namedChildren[0] && list.namedChildren[0].id === node.id;
}

function definitionName(node) {
  // function_definition / macro_definition: signature -> call_expression -> identifier;
  // short form: assignment whose left side is a call_expression.
  const sig = node.type === 'assignment' ? node : node.namedChildren.find((c) => c.type === 'signature');
  if (!sig) return null;
  let call = node.type === 'assignment' ? node.namedChildren[0] : sig.namedChildren[0];
  while (call && call.type === 'typed_expression') call = call.namedChildren[0];
  if (!call || call.type !== 'call_expression') return null;
  const id = call.namedChildren[0];
  return id && id.type === 'identifier' ? id.text : null;
}

function definitions(trees, types) {
  const out = [];
  for (const { file, tree } of trees) {
    for (const n of walk(tree.rootNode)) {
      if (!types.includes(n.type)) continue;
      if (n.type === 'assignment' && (!n.namedChildren[0] || n.namedChildren[0].type !== 'call_expression' ||
          n.parent.type !== 'source_file' && n.parent.type !== 'module_definition')) continue;
      const name = definitionName(n);
      if (name) out.push({ file, node: n, name });
    }
  }
  return out;
}

function checkGcsafeMacro(trees, used) {
  const macros = definitions(trees, ['macro_definition']).filter((d) => d.name === 'gcsafe');
  if (macros.length === 0) {
    if (used > 0) problem('@gcsafe is used but no `macro gcsafe` is defined');
    return;
  }
  for (const { file, node } of macros) {
    const calls = [...walk(node)].filter((c) => c.type === 'call_expression' && c.namedChildren[0] &&
      c.namedChildren[0].text === 'ccall');
    const names = calls.map((c) => {
      const a = c.namedChildren.find((x) => x.type === 'argument_list');
      return a && a.namedChildren[0] ? a.namedChildren[0].text : '';
    });
    const enter = names.indexOf(':jl_gc_safe_enter');
    const leave = names.indexOf(':jl_gc_safe_leave');
    if (enter < 0 || leave < 0 || leave < enter) {
      problem(`${where(file, node)}: macro gcsafe must call jl_gc_safe_enter before the C call and ` +
        'jl_gc_safe_leave after it');
    }
    if (!/GC\.@preserve/.test(node.text)) {
      problem(`${where(file, node)}: macro gcsafe must root the converted arguments (GC.@preserve)`);
    }
  }
}

// Calls inside a function body that must never run on kjit's threads.
const TRAMPOLINE_FORBIDDEN = [
  [/\btry\b/, 'try/catch'],
  [/\b(unsafe_string|_str|String|string)\(/, 'string construction (allocates)'],
  [/\b(println|print|show|push!|append!)\(/, 'I/O or allocation'],
  [/@(info|warn|error|debug|async|spawn)\b/, 'logging or task creation'],
  [/\[\]\s*\(/, 'a call of a stored Julia function'],
];

function checkLogTrampoline(trees) {
  const defs = definitions(trees, ['function_definition', 'assignment']);
  const setters = defs.filter((d) => /\bkjit_set_log_callback\s*\(/.test(d.node.text) &&
    d.name !== 'kjit_set_log_callback');
  let checked = 0;
  for (const s of setters) {
    for (const n of walk(s.node)) {
      if (n.type !== 'macrocall_expression') continue;
      const id = n.namedChildren.find((c) => c.type === 'macro_identifier');
      if (!id || id.text !== '@cfunction') continue;
      const args = n.namedChildren.find((c) => c.type === 'argument_list' || c.type === 'macro_argument_list');
      const target = args && args.namedChildren[0] ? args.namedChildren[0].text : '';
      const def = defs.find((d) => d.name === target && d.node.type === 'function_definition');
      const at = where(s.file, n);
      if (!def) {
        problem(`${at}: the log callback @cfunction names ${target || '?'}, whose definition was not found`);
        continue;
      }
      checked += 1;
      const body = def.node.text;
      if (!/uv_async_send/.test(body)) {
        problem(`${where(def.file, def.node)}: log callback ${target} runs on kjit's threads: it must only ` +
          'queue the message and wake a Julia task with uv_async_send');
      }
      for (const [re, what] of TRAMPOLINE_FORBIDDEN) {
        if (re.test(body)) {
          problem(`${where(def.file, def.node)}: log callback ${target} runs on kjit's threads and ` +
            `must not use ${what}; deliver the message on a Julia task instead`);
        }
      }
    }
  }
  if (setters.length === 0) problem('no function calls kjit_set_log_callback');
  console.log(`log callback: ${checked} trampoline(s) checked`);
}

// A tiny TOML reader: enough for Project.toml's [section] / key = "value" lines.
function readToml(file) {
  const out = {};
  let sec = '';
  for (const raw of fs.readFileSync(file, 'utf8').split('\n')) {
    const line = raw.replace(/#.*$/, '').trim();
    if (!line) continue;
    const m = line.match(/^\[([^\]]+)\]$/);
    if (m) {
      sec = m[1].trim();
      out[sec] = out[sec] || {};
      continue;
    }
    const kv = line.match(/^([A-Za-z0-9_]+)\s*=\s*(.*)$/);
    if (kv) (out[sec] = out[sec] || {})[kv[1]] = kv[2].replace(/^"(.*)"$/, '$1');
  }
  return out;
}

function checkCudaExtension(src) {
  const projectFile = path.join(src, 'Project.toml');
  if (!fs.existsSync(projectFile)) {
    problem(`${projectFile} does not exist`);
    return;
  }
  const project = readToml(projectFile);
  const weak = project.weakdeps || {};
  const exts = project.extensions || {};
  if (weak.CUDA !== CUDA_UUID) {
    problem(`${projectFile}: CUDA.jl (${CUDA_UUID}) is not a weak dependency: without an extension, ` +
      'launch without stream= runs on the legacy NULL stream instead of CUDA.jl\'s task-local stream');
  }
  const cudaExts = Object.keys(exts).filter((k) => exts[k] === 'CUDA' || /"CUDA"/.test(exts[k]));
  if (cudaExts.length === 0) problem(`${projectFile}: no [extensions] entry loads with CUDA`);
  for (const name of Object.keys(exts)) {
    const f1 = path.join(src, 'ext', `${name}.jl`);
    const f2 = path.join(src, 'ext', name, `${name}.jl`);
    const f = fs.existsSync(f1) ? f1 : fs.existsSync(f2) ? f2 : null;
    if (!f) {
      problem(`${projectFile}: extension ${name} has no file ext/${name}.jl`);
    } else if (!new RegExp(`\\bmodule\\s+${name}\\b`).test(fs.readFileSync(f, 'utf8'))) {
      problem(`${f}: does not define module ${name}`);
    }
  }
  console.log(`extensions: ${Object.keys(exts).length} checked`);
}

function main() {
  const args = parseArgs(process.argv);
  const parser = new Parser();
  parser.setLanguage(Julia);

  // 1. Parse.
  const files = findJl(args.src);
  if (files.length === 0) problem(`no .jl files under ${args.src}`);
  const trees = [];
  for (const f of files) {
    const text = fs.readFileSync(f, 'utf8');
    const tree = parser.parse(text);
    let bad = 0;
    for (const n of walk(tree.rootNode)) {
      if (n.type === 'ERROR' || n.isMissing) {
        bad += 1;
        if (bad <= 5) {
          const what = n.isMissing
            ? `missing "${n.type}"`
            : `syntax error in lines ${n.startPosition.row + 1}-${n.endPosition.row + 1} ` +
              `(the parser could not match "${text.slice(n.startIndex, n.startIndex + 40).split('\n')[0]}"...)`;
          problem(`${where(f, n)}: parse: ${what}`);
        }
      }
    }
    if (tree.rootNode.hasError && bad === 0) problem(`${f}: parse: tree has errors`);
    trees.push({ file: f, text, tree });
  }
  const parsedOk = problems.length === 0;
  console.log(`parse: ${files.length} file(s) ${parsedOk ? 'parse cleanly' : 'have errors'}`);

  // 2. Headers and exports.
  const { funcs, structs } = readHeaders(args.headers);
  const nmOut = execFileSync('nm', ['-D', '--defined-only', args.lib], { encoding: 'utf8' });
  const exported = new Set();
  for (const line of nmOut.split('\n')) {
    const parts = line.trim().split(/\s+/);
    if (parts.length >= 3 && /^[TtWiI]$/.test(parts[1])) exported.add(parts[2].split('@')[0]);
  }
  for (const name of funcs.keys()) {
    if (!exported.has(name)) problem(`header declares ${name} but ${args.lib} does not export it`);
  }

  // 3. ccalls.
  const called = new Map();
  const runtimeCalls = [];
  let ccalls = 0;
  let gcsafeCalls = 0;
  for (const { file, text, tree } of trees) {
    for (const n of walk(tree.rootNode)) {
      if (n.type !== 'call_expression') continue;
      const callee = n.namedChildren[0];
      if (!callee || callee.type !== 'identifier' || callee.text !== 'ccall') continue;
      ccalls += 1;
      const argList = n.namedChildren.find((c) => c.type === 'argument_list');
      const a = argList ? argList.namedChildren : [];
      const at = where(file, n);
      if (a.length < 3) {
        problem(`${at}: ccall with fewer than 3 arguments`);
        continue;
      }
      const spec = a[0];
      if (spec.type === 'quote_expression' && RUNTIME_CCALLS.has(spec.text.replace(/^:/, ''))) {
        runtimeCalls.push({ file, node: n, sym: spec.text.replace(/^:/, '') });
        continue;
      }
      if (spec.type !== 'tuple_expression' || spec.namedChildren.length !== 2 ||
          spec.namedChildren[0].type !== 'quote_expression') {
        problem(`${at}: ccall must name its function as (:symbol, libkjit), got ${spec.text}`);
        continue;
      }
      const sym = spec.namedChildren[0].text.replace(/^:/, '');
      const lib = spec.namedChildren[1].text;
      if (lib !== 'libkjit') problem(`${at}: ccall of ${sym} uses library "${lib}", not libkjit`);
      called.set(sym, (called.get(sym) || 0) + 1);
      const safe = isGcSafe(n);
      if (BLOCKING.gcsafe[sym] && !safe) {
        problem(`${at}: ${sym} can block (${BLOCKING.gcsafe[sym]}) but its ccall is not GC-safe: ` +
          'write it as @gcsafe ccall(...) so that garbage collection on other threads goes on');
      }
      if (BLOCKING.calls_back[sym] && safe) {
        problem(`${at}: ${sym} ${BLOCKING.calls_back[sym]}: it must be a plain ccall, not @gcsafe`);
      }
      if (safe) gcsafeCalls += 1;
      if (!exported.has(sym)) problem(`${at}: ccall names ${sym}, which ${args.lib} does not export`);
      const fn = funcs.get(sym);
      if (!fn) {
        problem(`${at}: ccall names ${sym}, which no public header declares`);
        continue;
      }
      const types = a[2];
      if (types.type !== 'tuple_expression') {
        problem(`${at}: ${sym}: argument types must be a tuple, got "${types.text}" ` +
          '(a single type needs a trailing comma: (T,))');
        continue;
      }
      const jtypes = types.namedChildren.map((t) => norm(t.text));
      const values = a.slice(3);
      if (jtypes.length !== fn.params.length) {
        problem(`${at}: ${sym}: ${jtypes.length} argument type(s), the C prototype has ` +
          `${fn.params.length}: ${fn.proto}`);
      }
      if (values.length !== jtypes.length) {
        problem(`${at}: ${sym}: declares ${jtypes.length} argument type(s) but passes ${values.length} value(s)`);
      }
      const rt = norm(a[1].text);
      const rAllowed = allowedJulia(fn.ret, structs, 'ret');
      if (!rAllowed.includes(rt)) {
        problem(`${at}: ${sym}: return type ${rt} does not match C "${fn.ret.text}" (allowed: ${rAllowed.join(', ')})`);
      }
      fn.params.forEach((p, i) => {
        if (i >= jtypes.length) return;
        const allowed = allowedJulia(p, structs, 'arg');
        if (!allowed.includes(jtypes[i])) {
          problem(`${at}: ${sym}: argument ${i + 1} (${p.name}) is ${jtypes[i]}, C type "${p.text}" ` +
            `(allowed: ${allowed.join(', ')})`);
        }
      });
    }
  }
  let missing = 0;
  for (const name of funcs.keys()) {
    if (!called.has(name)) {
      missing += 1;
      problem(`${name} (${funcs.get(name).file}) is not wrapped: no ccall names it`);
    }
  }
  console.log(`ccall: ${ccalls} ccall(s) checked; ${funcs.size - missing} of ${funcs.size} public ` +
    `functions wrapped; ${exported.size} kjit symbols exported`);

  // GC safety.
  for (const name of [...Object.keys(BLOCKING.gcsafe), ...Object.keys(BLOCKING.calls_back)]) {
    if (!funcs.has(name)) problem(`blocking.json names ${name}, which no public header declares`);
  }
  checkGcsafeMacro(trees, gcsafeCalls);
  console.log(`gc-safe: ${gcsafeCalls} GC-safe ccall(s); ${Object.keys(BLOCKING.gcsafe).length} ` +
    `blocking functions listed; ${runtimeCalls.length} runtime ccall(s)`);

  // Foreign threads and streams.
  checkLogTrampoline(trees);
  checkCudaExtension(args.src);

  // 4. Structs.
  const jlStructs = new Map();
  for (const { file, tree } of trees) {
    for (const n of walk(tree.rootNode)) {
      if (n.type !== 'struct_definition') continue;
      const head = n.namedChildren.find((c) => c.type === 'type_head');
      if (!head) continue;
      const name = head.text.split(/[<{\s]/)[0];
      const fields = n.namedChildren
        .filter((c) => c.type === 'typed_expression')
        .map((c) => ({ name: c.namedChildren[0].text, type: norm(c.namedChildren[c.namedChildren.length - 1].text) }));
      jlStructs.set(name, { file, node: n, fields });
    }
  }
  for (const [name, s] of structs) {
    const j = jlStructs.get(name);
    if (!j) {
      problem(`C struct ${name} (${s.file}) has no Julia struct of the same name`);
      continue;
    }
    const at = where(j.file, j.node);
    if (j.fields.length !== s.fields.length) {
      problem(`${at}: struct ${name} has ${j.fields.length} field(s), the C struct ${s.fields.length}`);
    }
    s.fields.forEach((cf, i) => {
      const jf = j.fields[i];
      if (!jf) return;
      if (jf.name !== cf.name) problem(`${at}: struct ${name} field ${i + 1} is ${jf.name}, C has ${cf.name}`);
      const allowed = allowedJulia(cf, structs, 'field');
      if (!allowed.includes(jf.type)) {
        problem(`${at}: struct ${name} field ${cf.name} is ${jf.type}, C type "${cf.text}" ` +
          `(allowed: ${allowed.join(', ')})`);
      }
    });
  }
  console.log(`structs: ${structs.size} C struct(s) compared`);

  // 7. Constants: every `const KJIT_X = <integer>` has the value the headers give KJIT_X.
  const cValues = readConstants(args.headers);
  let constants = 0;
  for (const { file } of trees) {
    const text = fs.readFileSync(file, 'utf8');
    const cre = /^const (KJIT_\w+) = (-?\d+)\s*$/gm;
    let m;
    while ((m = cre.exec(text))) {
      constants += 1;
      const want = cValues.get(m[1]);
      if (want === undefined) {
        problem(`${file}: ${m[1]} is not an enumerator or #define of the headers`);
      } else if (want !== null && want !== Number(m[2])) {
        problem(`${file}: ${m[1]} = ${m[2]}, the headers say ${want}`);
      }
    }
  }
  console.log(`constants: ${constants} integer constant(s) compared with the headers`);

  if (problems.length) {
    for (const p of problems) console.log(`FAIL ${p}`);
    console.log(`julia-check: 0 passed, ${problems.length} failed`);
    process.exit(1);
  }
  console.log('julia-check: 8 passed, 0 failed');
}

try {
  main();
} catch (e) {
  console.error(`julia-check: ${e.stack || e}`);
  process.exit(1);
}
