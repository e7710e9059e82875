// sbgate console. Plain JavaScript, no build step, nothing fetched from elsewhere.
//
// Security rules of this file: the key typed at sign-in lives only in `session` (this tab's
// memory) as a non-extractable WebCrypto key; every request carries a SAS token signed with it.
// Everything that comes from the broker (names, bodies, properties, errors) is put on the page as
// text (textContent, createTextNode, attribute values) — never as markup.
'use strict';
(() => {
  const ATOM = 'http://www.w3.org/2005/Atom';
  const SB = 'http://schemas.microsoft.com/netservices/2010/10/servicebus/connect';
  const XSI = 'http://www.w3.org/2001/XMLSchema-instance';
  const WINDOW_MS = 10 * 60 * 1000; // the chart's span
  const REFRESH_MS = 5000;

  const session = { keyName: '', key: null, token: '', tokenExpiry: 0 };
  const samples = new Map(); // entity path -> [{t, active, dead, scheduled}]
  let chartPath = '';
  let timers = [];

  const $ = (id) => document.getElementById(id);

  // el builds an element; attributes are set as properties or attributes, children as text nodes
  // when they are strings. It never parses markup.
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'text') e.textContent = v;
      else if (k === 'class') e.className = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else if (k in e && typeof v !== 'string') e[k] = v;
      else e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const k of kids.flat()) {
      if (k === null || k === undefined || k === false) continue;
      e.append(typeof k === 'string' || typeof k === 'number' ? document.createTextNode(String(k)) : k);
    }
    return e;
  }

  // ---- signing -------------------------------------------------------------------------------

  async function token() {
    const now = Math.floor(Date.now() / 1000);
    if (session.token && session.tokenExpiry - now > 300) return session.token;
    const se = now + 3600;
    const sr = encodeURIComponent(location.origin + '/');
    const sig = await crypto.subtle.sign('HMAC', session.key, new TextEncoder().encode(sr + '\n' + se));
    let bin = '';
    for (const b of new Uint8Array(sig)) bin += String.fromCharCode(b);
    session.token = 'SharedAccessSignature sr=' + sr + '&sig=' + encodeURIComponent(btoa(bin)) + '&se=' + se + '&skn=' + encodeURIComponent(session.keyName);
    session.tokenExpiry = se;
    return session.token;
  }

  class ApiError extends Error {
    constructor(status, statusText, body) {
      let detail = (body || '').trim();
      try {
        const doc = new DOMParser().parseFromString(body, 'application/xml');
        const d = doc.getElementsByTagName('Detail')[0];
        if (d) detail = d.textContent;
      } catch (_) { /* not XML: keep the text */ }
      if (detail.length > 2000) detail = detail.slice(0, 2000) + '…';
      let msg = status + ' ' + (statusText || '') + (detail ? ': ' + detail : '');
      if (status === 401 && /claim|Manage|Unauthorized access/i.test(detail) && !/signature|expired|unknown key|KeyName/i.test(detail)) {
        msg += '\nThe key "' + session.keyName + '" lacks the right named above.';
      }
      super(msg);
      this.status = status;
      this.detail = detail;
    }
  }

  // seg escapes one path segment; '$' stays as it is ($DeadLetterQueue, $browse, ...).
  const seg = (s) => encodeURIComponent(s).replace(/%24/g, '$');
  const pathURL = (p) => '/' + p.split('/').map(seg).join('/');

  async function api(method, path, opts = {}) {
    const headers = Object.assign({ Authorization: await token() }, opts.headers || {});
    let r;
    try {
      r = await fetch(path, { method, headers, body: opts.body, cache: 'no-store', credentials: 'omit' });
    } catch (e) {
      throw new Error('The broker did not answer: ' + e.message);
    }
    const text = await r.text();
    if (!r.ok) throw new ApiError(r.status, r.statusText, text);
    return { status: r.status, headers: r.headers, text };
  }

  // ---- Atom ----------------------------------------------------------------------------------

  function parseEntries(text) {
    const doc = new DOMParser().parseFromString(text, 'application/xml');
    const out = [];
    for (const e of doc.getElementsByTagNameNS(ATOM, 'entry')) {
      const title = e.getElementsByTagNameNS(ATOM, 'title')[0];
      const content = e.getElementsByTagNameNS(ATOM, 'content')[0];
      const desc = content && content.firstElementChild;
      if (desc) out.push({ name: title ? title.textContent : '', desc });
    }
    return out;
  }
  const child = (node, name) => node ? [...node.children].find((c) => c.localName === name) : undefined;
  const text = (node, name) => { const c = child(node, name); return c ? c.textContent : ''; };
  function counts(desc) {
    const cd = child(desc, 'CountDetails');
    const n = (name) => Number(text(cd, name) || 0);
    return { active: n('ActiveMessageCount'), dead: n('DeadLetterMessageCount'), scheduled: n('ScheduledMessageCount'), transfer: n('TransferMessageCount'), size: Number(text(desc, 'SizeInBytes') || 0) };
  }

  async function listAll(path) {
    const all = [];
    for (let skip = 0; ; skip += 100) {
      const r = await api('GET', path + '?$skip=' + skip + '&$top=100');
      const page = parseEntries(r.text);
      all.push(...page);
      if (page.length < 100) return all;
    }
  }

  function subscriptionParts(path) {
    const m = /^(.+)\/Subscriptions\/([^/]+)$/i.exec(path);
    return m ? { topic: m[1], sub: m[2] } : null;
  }

  async function getEntity(path) {
    const sp = subscriptionParts(path);
    const r = await api('GET', sp ? pathURL(sp.topic) + '/Subscriptions/' + seg(sp.sub) : pathURL(path));
    const es = parseEntries(r.text);
    if (!es.length) throw new Error('There is no queue, topic or subscription at "' + path + '".');
    const kind = { QueueDescription: 'queue', TopicDescription: 'topic', SubscriptionDescription: 'subscription' }[es[0].desc.localName] || es[0].desc.localName;
    return { kind, desc: es[0].desc, name: es[0].name };
  }

  // ---- page frame ----------------------------------------------------------------------------

  function showError(err) {
    const box = $('error');
    box.textContent = err && err.message ? err.message : String(err);
    box.hidden = false;
  }
  function clearError() { $('error').hidden = true; $('error').textContent = ''; }
  async function guarded(fn) {
    try { return await fn(); } catch (e) { showError(e); return undefined; }
  }

  function confirmOnce(message) {
    const d = $('confirm');
    $('confirm-text').textContent = message;
    d.returnValue = '';
    return new Promise((resolve) => {
      d.addEventListener('close', () => resolve(d.returnValue === 'ok'), { once: true });
      d.showModal();
      $('confirm-ok').focus();
    });
  }

  function crumbs(parts) {
    const nav = $('crumbs');
    nav.replaceChildren();
    for (const [label, href] of parts) {
      nav.append(href ? el('a', { href, text: label }) : el('span', { text: label }), ' / ');
    }
  }

  function stopTimers() { for (const t of timers) clearInterval(t); timers = []; }

  const entityHref = (p) => '#/entity/' + encodeURIComponent(p);
  const messagesHref = (p, tab) => '#/messages/' + encodeURIComponent(p) + (tab ? '?tab=' + tab : '');

  // ---- sign-in -------------------------------------------------------------------------------

  function parseConnectionString(s) {
    const out = {};
    for (const part of s.split(';')) {
      const i = part.indexOf('=');
      if (i > 0) out[part.slice(0, i).trim().toLowerCase()] = part.slice(i + 1).trim();
    }
    return out;
  }

  function renderSignIn() {
    crumbs([]);
    $('who').textContent = '';
    $('signout').hidden = true;
    const msg = el('p', { id: 'signin-error', class: 'err', role: 'alert' });
    const conn = el('textarea', { id: 'conn', placeholder: 'Endpoint=sb://…/;SharedAccessKeyName=…;SharedAccessKey=…', autocomplete: 'off', spellcheck: 'false' });
    const keyName = el('input', { id: 'keyname', autocomplete: 'off', placeholder: 'RootManageSharedAccessKey' });
    const key = el('input', { id: 'key', type: 'password', autocomplete: 'off' });
    const form = el('form', { class: 'signin card', onsubmit: async (ev) => {
      ev.preventDefault();
      msg.textContent = '';
      let name = keyName.value.trim(), k = key.value.trim();
      if (conn.value.trim()) {
        const cs = parseConnectionString(conn.value);
        name = cs.sharedaccesskeyname || '';
        k = cs.sharedaccesskey || '';
        if (!name || !k) { msg.textContent = 'The connection string needs SharedAccessKeyName and SharedAccessKey.'; return; }
      }
      if (!name || !k) { msg.textContent = 'Give a connection string, or a key name and a key.'; return; }
      if (!window.crypto || !crypto.subtle) {
        msg.textContent = 'This browser offers WebCrypto only on https or localhost pages: serve sbgate with SBGATE_TLS_CERT/SBGATE_TLS_KEY, or reach it through an SSH tunnel to localhost.';
        return;
      }
      try {
        session.key = await crypto.subtle.importKey('raw', new TextEncoder().encode(k), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
        session.keyName = name;
        session.token = '';
        await api('GET', '/$namespaceinfo');
      } catch (e) {
        session.key = null; session.token = ''; session.keyName = '';
        msg.textContent = 'Sign-in failed: ' + e.message;
        return;
      }
      conn.value = ''; key.value = '';
      route();
    } },
    el('h1', { text: 'Sign in to sbgate' }),
    el('p', { class: 'note', text: 'The key stays in this tab: the page signs each request with it (SAS, HMAC-SHA256) and forgets it when the tab closes. The console can do what the key may do.' }),
    el('label', { for: 'conn', text: 'Connection string' }), conn,
    el('p', { class: 'note', text: 'or' }),
    el('div', { class: 'form' }, el('label', { for: 'keyname', text: 'Key name' }), keyName, el('label', { for: 'key', text: 'Key' }), key),
    el('div', { class: 'row' }, el('button', { type: 'submit', id: 'signin', class: 'primary', text: 'Sign in' })),
    msg);
    $('app').replaceChildren(form);
    conn.focus();
  }

  // ---- namespace page ------------------------------------------------------------------------

  function record(path, c) {
    const now = Date.now();
    const list = samples.get(path) || [];
    list.push({ t: now, active: c.active, dead: c.dead, scheduled: c.scheduled });
    while (list.length && now - list[0].t > WINDOW_MS) list.shift();
    samples.set(path, list);
  }

  function renderNamespace() {
    crumbs([['namespace', null]]);
    const filter = el('input', { id: 'filter', type: 'search', placeholder: 'filter by name  ( / )', 'aria-label': 'Filter by name' });
    const live = el('input', { id: 'live', type: 'checkbox', checked: true });
    const body = el('tbody', { id: 'entities' });
    const status = el('span', { id: 'refreshed', class: 'note' });
    const chartBox = el('div', { id: 'chart-box' });
    const openPath = el('input', { id: 'open-path', placeholder: 'queue, topic or topic/Subscriptions/name' });
    let rows = [];

    function paint() {
      const f = filter.value.trim().toLowerCase();
      body.replaceChildren();
      for (const r of rows) {
        if (f && !r.path.toLowerCase().includes(f)) continue;
        const chartBtn = el('button', { type: 'button', class: 'chart-btn', text: 'chart', 'aria-label': 'chart of ' + r.path, onclick: () => { chartPath = r.path; drawChart(chartBox); paint(); } });
        body.append(el('tr', { 'data-path': r.path, class: r.path === chartPath ? 'selected' : '' },
          el('td', {}, el('a', { href: entityHref(r.path), text: r.path })),
          el('td', { text: r.kind }),
          el('td', { class: 'num c-active', text: r.kind === 'topic' ? '' : r.c.active }),
          el('td', { class: 'num c-dead', text: r.kind === 'topic' ? '' : r.c.dead }),
          el('td', { class: 'num c-scheduled', text: r.c.scheduled }),
          el('td', { class: 'num c-size', text: r.kind === 'subscription' ? '' : r.c.size }),
          el('td', { text: r.status }),
          el('td', {}, r.kind === 'topic' ? null : chartBtn)));
      }
      if (!body.children.length) body.append(el('tr', {}, el('td', { colSpan: 8, class: 'note', text: rows.length ? 'Nothing matches the filter.' : 'No queues or topics yet.' })));
    }

    async function load() {
      await guarded(async () => {
        const [queues, topics] = await Promise.all([listAll('/$Resources/Queues'), listAll('/$Resources/Topics')]);
        const next = [];
        for (const q of queues) next.push({ path: q.name, kind: 'queue', c: counts(q.desc), status: text(q.desc, 'Status') });
        for (const t of topics) {
          next.push({ path: t.name, kind: 'topic', c: counts(t.desc), status: text(t.desc, 'Status') });
          const subs = await listAll(pathURL(t.name) + '/Subscriptions');
          for (const s of subs) next.push({ path: t.name + '/Subscriptions/' + s.name, kind: 'subscription', c: counts(s.desc), status: text(s.desc, 'Status') });
        }
        rows = next;
        for (const r of rows) if (r.kind !== 'topic') record(r.path, r.c);
        if (!chartPath || !rows.some((r) => r.path === chartPath)) {
          const first = rows.find((r) => r.kind !== 'topic');
          chartPath = first ? first.path : '';
        }
        status.textContent = 'updated ' + new Date().toLocaleTimeString();
        paint();
        drawChart(chartBox);
      });
    }

    filter.addEventListener('input', paint);
    live.addEventListener('change', () => { stopTimers(); if (live.checked) timers.push(setInterval(load, REFRESH_MS)); });
    $('app').replaceChildren(
      el('h1', { text: 'Namespace' }),
      el('div', { class: 'row' }, filter,
        el('label', {}, live, ' live'),
        el('button', { type: 'button', id: 'refresh', text: 'Refresh', onclick: load }), status),
      el('div', { class: 'scroll' }, el('table', {},
        el('thead', {}, el('tr', {}, ...['Name', 'Type', 'Active', 'Dead-letter', 'Scheduled', 'Size (bytes)', 'Status', ''].map((h, i) => el('th', { class: i >= 2 && i <= 5 ? 'num' : '', text: h })))),
        body)),
      el('p', { class: 'note', text: 'Deferred messages are counted as active, as Service Bus counts them.' }),
      el('h2', { text: 'Counts over the last minutes' }), chartBox,
      el('form', { class: 'row', onsubmit: (ev) => { ev.preventDefault(); if (openPath.value.trim()) location.hash = entityHref(openPath.value.trim()); } },
        el('label', { for: 'open-path', text: 'Open' }), openPath, el('button', { type: 'submit', text: 'Open' })));
    timers.push(setInterval(load, REFRESH_MS));
    load();
  }

  function svg(tag, attrs) {
    const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    return e;
  }

  function drawChart(box) {
    box.replaceChildren();
    if (!chartPath) { box.append(el('p', { class: 'note', text: 'No queue or subscription to chart.' })); return; }
    const list = samples.get(chartPath) || [];
    const W = 600, H = 160, L = 40, B = 18;
    const now = Date.now();
    const max = Math.max(1, ...list.map((s) => Math.max(s.active, s.dead, s.scheduled)));
    const x = (t) => L + (W - L - 5) * (1 - (now - t) / WINDOW_MS);
    const y = (v) => 5 + (H - B - 5) * (1 - v / max);
    const chart = svg('svg', { class: 'chart', id: 'chart', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': 'message counts of ' + chartPath });
    chart.append(svg('line', { x1: L, y1: H - B, x2: W, y2: H - B, stroke: '#d8dde4' }), svg('line', { x1: L, y1: 5, x2: L, y2: H - B, stroke: '#d8dde4' }));
    const label = (x0, y0, s, anchor) => { const t = svg('text', { x: x0, y: y0, 'text-anchor': anchor || 'start' }); t.textContent = s; chart.append(t); };
    label(L - 4, 12, String(max), 'end'); label(L - 4, H - B, '0', 'end');
    label(L, H - 4, '-10 min'); label(W - 5, H - 4, 'now', 'end');
    for (const [key, cls] of [['active', 'active'], ['dead', 'dead'], ['scheduled', 'scheduled']]) {
      if (!list.length) break;
      const pts = list.map((s) => x(s.t).toFixed(1) + ',' + y(s[key]).toFixed(1));
      if (pts.length === 1) pts.push((W - 5) + ',' + y(list[0][key]).toFixed(1));
      chart.append(svg('polyline', { class: cls, points: pts.join(' ') }));
    }
    const last = list[list.length - 1];
    box.append(el('p', {}, el('strong', { id: 'chart-title', text: chartPath }),
      last ? el('span', { class: 'legend' }, '  ', el('span', { class: 'a', text: 'active ' + last.active }), el('span', { class: 'd', text: 'dead-letter ' + last.dead }), el('span', { class: 's', text: 'scheduled ' + last.scheduled })) : null),
    chart);
  }

  // ---- entity page ---------------------------------------------------------------------------

  const EDITABLE = {
    queue: ['LockDuration', 'MaxSizeInMegabytes', 'DefaultMessageTimeToLive', 'DeadLetteringOnMessageExpiration', 'DuplicateDetectionHistoryTimeWindow', 'MaxDeliveryCount', 'EnableBatchedOperations', 'Status', 'ForwardTo', 'ForwardDeadLetteredMessagesTo', 'AutoDeleteOnIdle', 'UserMetadata'],
    topic: ['MaxSizeInMegabytes', 'DefaultMessageTimeToLive', 'DuplicateDetectionHistoryTimeWindow', 'EnableBatchedOperations', 'Status', 'SupportOrdering', 'AutoDeleteOnIdle', 'UserMetadata'],
    subscription: ['LockDuration', 'DefaultMessageTimeToLive', 'DeadLetteringOnMessageExpiration', 'DeadLetteringOnFilterEvaluationExceptions', 'MaxDeliveryCount', 'EnableBatchedOperations', 'Status', 'ForwardTo', 'ForwardDeadLetteredMessagesTo', 'AutoDeleteOnIdle', 'UserMetadata'],
  };
  const OPTIONAL = ['ForwardTo', 'ForwardDeadLetteredMessagesTo', 'UserMetadata'];
  const STATUSES = ['Active', 'Disabled', 'SendDisabled', 'ReceiveDisabled'];

  async function renderEntity(path, live) {
    const sp = subscriptionParts(path);
    crumbs(sp ? [['namespace', '#/'], [sp.topic, entityHref(sp.topic)], [sp.sub, null]] : [['namespace', '#/'], [path, null]]);
    const app = $('app');
    app.replaceChildren(el('p', { text: 'Loading…' }));
    const got = await guarded(() => getEntity(path));
    if (!live()) return;
    if (!got) { app.replaceChildren(el('p', { class: 'note', text: 'Nothing to show.' })); return; }
    const { kind, desc } = got;
    const c = counts(desc);
    const editable = EDITABLE[kind] || [];
    const inputs = new Map();
    const rows = [];
    const present = new Set();
    for (const node of desc.children) {
      if (node.children.length) continue;
      present.add(node.localName);
      rows.push(node.localName);
    }
    for (const name of editable) if (!present.has(name) && OPTIONAL.includes(name)) rows.push(name);
    const form = el('div', { class: 'form', id: 'props' });
    for (const name of rows) {
      const value = text(desc, name);
      let control;
      if (editable.includes(name)) {
        if (name === 'Status') {
          control = el('select', { id: 'p-' + name }, ...STATUSES.map((s) => el('option', { value: s, text: s, selected: s === value })));
        } else if (value === 'true' || value === 'false') {
          control = el('select', { id: 'p-' + name }, el('option', { value: 'true', text: 'true', selected: value === 'true' }), el('option', { value: 'false', text: 'false', selected: value === 'false' }));
        } else {
          control = el('input', { id: 'p-' + name, value });
        }
        inputs.set(name, control);
      } else {
        control = el('span', { id: 'p-' + name, text: value });
      }
      form.append(el('label', { for: 'p-' + name, text: name }), control);
    }
    const saveMsg = el('span', { id: 'save-msg' });
    // An update replaces the whole description, so every change sends all of it back.
    const putDescription = (copy) => {
      const xml = '<entry xmlns="' + ATOM + '"><content type="application/xml">' + new XMLSerializer().serializeToString(copy) + '</content></entry>';
      const url = sp ? pathURL(sp.topic) + '/Subscriptions/' + seg(sp.sub) : pathURL(path);
      return api('PUT', url, { headers: { 'Content-Type': 'application/atom+xml;type=entry;charset=utf-8', 'If-Match': '*' }, body: xml });
    };
    const save = async () => {
      saveMsg.textContent = ''; saveMsg.className = '';
      const copy = desc.cloneNode(true);
      for (const [name, input] of inputs) {
        let node = child(copy, name);
        const v = input.value.trim();
        if (OPTIONAL.includes(name) && v === '') { if (node) node.remove(); continue; }
        if (!node) { node = copy.ownerDocument.createElementNS(SB, name); copy.append(node); }
        node.textContent = v;
      }
      try {
        await putDescription(copy);
        saveMsg.textContent = 'Saved.'; saveMsg.className = 'ok';
      } catch (e) {
        saveMsg.textContent = e.message; saveMsg.className = 'err';
      }
    };
    const parts = [
      el('h1', { text: path }),
      el('p', { class: 'note', id: 'entity-kind', text: kind + (kind === 'topic' ? '' : ' · ' + c.active + ' active · ' + c.dead + ' dead-letter') + ' · ' + c.scheduled + ' scheduled · ' + c.size + ' bytes' }),
      el('div', { class: 'row' },
        kind !== 'topic' ? el('a', { href: messagesHref(path, 'active'), id: 'to-messages', text: 'Messages' }) : null,
        kind !== 'topic' ? el('a', { href: messagesHref(path, 'dead'), id: 'to-dlq', text: 'Dead letters (' + c.dead + ')' }) : null,
        kind === 'topic' ? el('a', { href: messagesHref(path, 'send'), id: 'to-send', text: 'Send a message' }) : null),
      el('h2', { text: 'Properties' }), form,
      el('div', { class: 'row' }, el('button', { type: 'button', id: 'save', class: 'primary', text: 'Save properties', onclick: save }), saveMsg),
    ];
    if (kind === 'queue' || kind === 'topic') parts.push(...authorizationRules(path, desc, putDescription));
    app.replaceChildren(...parts);
    if (kind === 'subscription') { const rs = await rulesSection(sp); if (live()) app.append(...rs); }
    if (kind === 'topic') { const ss = await subscriptionsSection(path); if (live()) app.append(...ss); }
  }

  // randomKey is a new shared access key: 32 random bytes in base64, as the service makes them.
  function randomKey() {
    const b = crypto.getRandomValues(new Uint8Array(32));
    let bin = '';
    for (const x of b) bin += String.fromCharCode(x);
    return btoa(bin);
  }

  // authorizationRules lists the entity's keys; adding or removing one saves the description
  // as it was loaded with only that change (unsaved property edits are not sent with it).
  function authorizationRules(path, desc, putDescription) {
    const ar = child(desc, 'AuthorizationRules');
    const rules = ar ? [...ar.children] : [];
    const body = el('tbody', { id: 'auth-rules' });
    const msg = el('div', { id: 'auth-msg' });
    const change = async (edit) => {
      msg.textContent = ''; msg.className = '';
      const copy = desc.cloneNode(true);
      let list = child(copy, 'AuthorizationRules');
      if (!list) { list = copy.ownerDocument.createElementNS(SB, 'AuthorizationRules'); copy.append(list); }
      try {
        edit(list);
        await putDescription(copy);
        await route();
      } catch (e) {
        msg.textContent = e.message; msg.className = 'err';
      }
    };
    rules.forEach((r, i) => {
      const name = text(r, 'KeyName');
      const rights = [...(child(r, 'Rights') || { children: [] }).children].map((x) => x.textContent).join(', ');
      const keyCell = el('td', {});
      const primary = text(r, 'PrimaryKey');
      keyCell.append(el('button', { type: 'button', text: 'show key', onclick: () => { keyCell.replaceChildren(el('code', { text: primary })); } }));
      const remove = el('button', { type: 'button', class: 'danger auth-remove', text: 'Remove', onclick: async () => {
        if (!await confirmOnce('Remove key "' + name + '" of ' + path + '? Tokens signed with it stop working.')) return;
        await change((list) => { list.children[i].remove(); });
      } });
      body.append(el('tr', { 'data-key': name }, el('td', { text: name }), el('td', { text: rights }), keyCell, el('td', {}, remove)));
    });
    if (!rules.length) body.append(el('tr', {}, el('td', { colSpan: 4, class: 'note', text: 'No keys of this entity; namespace keys apply.' })));
    const keyName = el('input', { id: 'new-key-name', placeholder: 'key name' });
    const boxes = ['Listen', 'Send', 'Manage'].map((r) => el('input', { type: 'checkbox', value: r, id: 'right-' + r }));
    const add = el('form', { class: 'row', onsubmit: async (ev) => {
      ev.preventDefault();
      const name = keyName.value.trim();
      const rights = boxes.filter((b) => b.checked).map((b) => b.value);
      msg.textContent = ''; msg.className = 'err';
      if (!name) { msg.textContent = 'The key needs a name.'; return; }
      if (!rights.length) { msg.textContent = 'Choose at least one right.'; return; }
      await change((list) => {
        const doc = list.ownerDocument;
        const mk = (n, t) => { const e = doc.createElementNS(SB, n); if (t !== undefined) e.textContent = t; return e; };
        const rule = mk('AuthorizationRule');
        rule.setAttributeNS(XSI, 'i:type', 'SharedAccessAuthorizationRule');
        const r = mk('Rights');
        for (const x of rights) r.append(mk('AccessRights', x));
        rule.append(mk('ClaimType', 'SharedAccessKey'), mk('ClaimValue', 'None'), r, mk('KeyName', name), mk('PrimaryKey', randomKey()), mk('SecondaryKey', randomKey()));
        list.append(rule);
      });
    } }, el('label', { for: 'new-key-name', text: 'New key' }), keyName,
    ...boxes.map((b) => el('label', {}, b, ' ' + b.value)), el('button', { type: 'submit', id: 'add-key', text: 'Add key' }));
    return [el('h2', { text: 'Authorization rules' }),
      el('div', { class: 'scroll' }, el('table', {}, el('thead', {}, el('tr', {}, el('th', { text: 'Key name' }), el('th', { text: 'Rights' }), el('th', { text: 'Primary key' }), el('th', { text: '' }))), body)),
      add, msg];
  }

  async function subscriptionsSection(topic) {
    const out = [el('h2', { text: 'Subscriptions' })];
    const subs = await guarded(() => listAll(pathURL(topic) + '/Subscriptions'));
    if (!subs) return out;
    const body = el('tbody', {});
    for (const s of subs) {
      const c = counts(s.desc);
      body.append(el('tr', {}, el('td', {}, el('a', { href: entityHref(topic + '/Subscriptions/' + s.name), text: s.name })), el('td', { class: 'num', text: c.active }), el('td', { class: 'num', text: c.dead })));
    }
    const name = el('input', { id: 'new-sub', placeholder: 'name' });
    out.push(el('table', {}, el('thead', {}, el('tr', {}, el('th', { text: 'Name' }), el('th', { class: 'num', text: 'Active' }), el('th', { class: 'num', text: 'Dead-letter' }))), body),
      el('form', { class: 'row', onsubmit: async (ev) => {
        ev.preventDefault();
        if (!name.value.trim()) return;
        const ok = await guarded(() => api('PUT', pathURL(topic) + '/Subscriptions/' + seg(name.value.trim()), { headers: { 'Content-Type': 'application/atom+xml;type=entry;charset=utf-8' }, body: '' }));
        if (ok) route();
      } }, el('label', { for: 'new-sub', text: 'New subscription' }), name, el('button', { type: 'submit', text: 'Create' })));
    return out;
  }

  // ---- rules ---------------------------------------------------------------------------------

  const xmlEscape = (s) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
  const CORRELATION_FIELDS = ['CorrelationId', 'MessageId', 'To', 'ReplyTo', 'Label', 'SessionId', 'ReplyToSessionId', 'ContentType'];

  function typeOf(node) {
    const t = node ? (node.getAttributeNS(XSI, 'type') || '') : '';
    return t.includes(':') ? t.slice(t.indexOf(':') + 1) : t;
  }

  // ruleText is a rule's filter as the editor shows it: the SQL expression, or Field=Value lines.
  function ruleText(filter) {
    if (typeOf(filter) !== 'CorrelationFilter') return text(filter, 'SqlExpression');
    const lines = [];
    for (const c of filter.children) {
      if (c.localName === 'Properties') {
        for (const kv of c.children) lines.push(text(kv, 'Key') + '=' + text(kv, 'Value'));
      } else if (c.textContent) lines.push(c.localName + '=' + c.textContent);
    }
    return lines.join('\n');
  }

  function typedValue(v) {
    if (/^".*"$/.test(v)) return ['string', v.slice(1, -1)];
    if (v === 'true' || v === 'false') return ['boolean', v];
    if (/^-?\d+$/.test(v)) return ['long', v];
    if (v !== '' && !isNaN(Number(v))) return ['double', v];
    return ['string', v];
  }

  function ruleXML(name, type, filterText, actionText, params) {
    let f;
    if (type === 'SqlFilter') {
      f = '<Filter i:type="SqlFilter"><SqlExpression>' + xmlEscape(filterText) + '</SqlExpression>' + (params || '') + '</Filter>';
    } else if (type === 'TrueFilter') {
      f = '<Filter i:type="TrueFilter"><SqlExpression>1=1</SqlExpression></Filter>';
    } else if (type === 'FalseFilter') {
      f = '<Filter i:type="FalseFilter"><SqlExpression>1=0</SqlExpression></Filter>';
    } else {
      let sys = '', user = '';
      for (const line of filterText.split('\n')) {
        if (!line.trim()) continue;
        const i = line.indexOf('=');
        if (i <= 0) throw new Error('A correlation filter line must be Field=Value: "' + line + '"');
        const k = line.slice(0, i).trim(), v = line.slice(i + 1).trim();
        const field = CORRELATION_FIELDS.find((x) => x.toLowerCase() === k.toLowerCase());
        if (field) sys += '<' + field + '>' + xmlEscape(v) + '</' + field + '>';
        else { const [t, tv] = typedValue(v); user += '<KeyValueOfstringanyType><Key>' + xmlEscape(k) + '</Key><Value i:type="d:' + t + '">' + xmlEscape(tv) + '</Value></KeyValueOfstringanyType>'; }
      }
      f = '<Filter i:type="CorrelationFilter">' + sys + (user ? '<Properties>' + user + '</Properties>' : '') + '</Filter>';
    }
    const a = actionText.trim() ? '<Action i:type="SqlRuleAction"><SqlExpression>' + xmlEscape(actionText) + '</SqlExpression></Action>' : '<Action i:type="EmptyRuleAction"/>';
    return '<entry xmlns="' + ATOM + '"><content type="application/xml"><RuleDescription xmlns="' + SB + '" xmlns:i="' + XSI + '" xmlns:d="http://www.w3.org/2001/XMLSchema">' +
      f + a + '<Name>' + xmlEscape(name) + '</Name></RuleDescription></content></entry>';
  }

  function ruleEditor(sp, rule) {
    const isNew = !rule;
    const filter = rule ? child(rule.desc, 'Filter') : null;
    const action = rule ? child(rule.desc, 'Action') : null;
    const params = filter ? child(filter, 'Parameters') : null;
    const id = isNew ? 'new' : rule.name;
    const nameIn = el('input', { class: 'rule-name', value: isNew ? '' : rule.name, disabled: !isNew, 'aria-label': 'rule name' });
    const type = el('select', { class: 'rule-type', 'aria-label': 'filter type' }, ...['SqlFilter', 'CorrelationFilter', 'TrueFilter', 'FalseFilter'].map((t) => el('option', { value: t, text: t, selected: (typeOf(filter) || 'SqlFilter') === t })));
    const ft = el('textarea', { class: 'rule-filter', rows: 2, 'aria-label': 'filter', placeholder: 'SQL: amount > 10 AND sys.Label = \'x\'   ·   correlation: one Field=Value a line' }, );
    ft.value = filter ? ruleText(filter) : '';
    const at = el('textarea', { class: 'rule-action', rows: 1, 'aria-label': 'action', placeholder: 'SET sys.Label = \'x\' (optional)' });
    at.value = action ? text(action, 'SqlExpression') : '';
    // Editing the text of a true or false filter makes it a SQL filter.
    ft.addEventListener('input', () => { if (type.value === 'TrueFilter' || type.value === 'FalseFilter') type.value = 'SqlFilter'; });
    const msg = el('div', { class: 'rule-msg', 'data-rule': id });
    const url = () => pathURL(sp.topic) + '/Subscriptions/' + seg(sp.sub) + '/Rules/' + seg(nameIn.value.trim());
    const save = async () => {
      msg.textContent = ''; msg.className = 'rule-msg';
      try {
        if (!nameIn.value.trim()) throw new Error('The rule needs a name.');
        const body = ruleXML(nameIn.value.trim(), type.value, ft.value, at.value, params && type.value === 'SqlFilter' ? new XMLSerializer().serializeToString(params) : '');
        const headers = { 'Content-Type': 'application/atom+xml;type=entry;charset=utf-8' };
        if (!isNew) headers['If-Match'] = '*';
        await api('PUT', url(), { headers, body });
        msg.textContent = 'Saved.'; msg.className = 'rule-msg ok';
        if (isNew) route();
      } catch (e) {
        msg.textContent = e.message; msg.className = 'rule-msg err';
      }
    };
    const del = async () => {
      if (!await confirmOnce('Delete rule "' + rule.name + '" of ' + sp.topic + '/Subscriptions/' + sp.sub + '?')) return;
      try { await api('DELETE', url()); route(); } catch (e) { msg.textContent = e.message; msg.className = 'rule-msg err'; }
    };
    return el('div', { class: 'card rule', 'data-rule': id },
      el('div', { class: 'row' }, nameIn, type),
      ft,
      params && params.children.length ? el('p', { class: 'note', text: 'Parameters: ' + [...params.children].map((kv) => text(kv, 'Key') + '=' + text(kv, 'Value')).join(', ') + ' (kept)' }) : null,
      at,
      el('div', { class: 'row' }, el('button', { type: 'button', class: 'rule-save primary', text: isNew ? 'Add rule' : 'Save rule', onclick: save }),
        isNew ? null : el('button', { type: 'button', class: 'rule-delete danger', text: 'Delete', onclick: del })),
      msg);
  }

  async function rulesSection(sp) {
    const out = [el('h2', { text: 'Rules' })];
    const rules = await guarded(() => listAll(pathURL(sp.topic) + '/Subscriptions/' + seg(sp.sub) + '/Rules'));
    if (!rules) return out;
    const box = el('div', { id: 'rules' });
    for (const r of rules) box.append(ruleEditor(sp, r));
    if (!rules.length) box.append(el('p', { class: 'note', text: 'No rules: this subscription receives nothing.' }));
    out.push(box, el('h2', { text: 'New rule' }), ruleEditor(sp, null));
    return out;
  }

  // ---- messages page -------------------------------------------------------------------------

  const TABS = [['active', 'Active'], ['scheduled', 'Scheduled'], ['deferred', 'Deferred'], ['dead', 'Dead-letter'], ['send', 'Send']];

  function bodyBytes(m) {
    if (m.BodyBase64 !== undefined && m.BodyBase64 !== null) {
      const bin = atob(m.BodyBase64);
      const b = new Uint8Array(bin.length);
      for (let i = 0; i < bin.length; i++) b[i] = bin.charCodeAt(i);
      return b;
    }
    return null;
  }

  function hexDump(bytes) {
    const lines = [];
    for (let off = 0; off < bytes.length && off < 4096; off += 16) {
      const chunk = bytes.slice(off, off + 16);
      const hex = [...chunk].map((b) => b.toString(16).padStart(2, '0')).join(' ');
      const asc = [...chunk].map((b) => (b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : '.')).join('');
      lines.push(off.toString(16).padStart(6, '0') + '  ' + hex.padEnd(48) + '  ' + asc);
    }
    if (bytes.length > 4096) lines.push('… ' + bytes.length + ' bytes in all');
    return lines.join('\n');
  }

  function bodyView(m) {
    const bytes = bodyBytes(m);
    const bodyText = m.Body !== undefined && m.Body !== null ? m.Body : null;
    let pretty = null;
    if (bodyText !== null && /^\s*[[{]/.test(bodyText)) {
      try { pretty = JSON.stringify(JSON.parse(bodyText), null, 2); } catch (_) { /* not JSON */ }
    }
    const modes = [];
    const hex = ['Hex', hexDump(bytes || new TextEncoder().encode(bodyText || ''))];
    // Control characters (other than tab and line ends) mean binary data: hex first.
    const binary = bytes !== null || /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/.test(bodyText || '');
    if (binary) modes.push(hex);
    if (pretty !== null) modes.push(['JSON', pretty]);
    if (bodyText !== null) modes.push(['Text', bodyText]);
    if (!binary) modes.push(hex);
    const pre = el('pre', { class: 'body-preview', id: 'body-preview' });
    const bar = el('div', { class: 'tabs' });
    const show = (i) => {
      pre.textContent = modes[i][1];
      pre.dataset.mode = modes[i][0].toLowerCase();
      [...bar.children].forEach((b, j) => b.classList.toggle('active', i === j));
    };
    modes.forEach(([label], i) => bar.append(el('a', { href: '#', text: label, 'data-mode': label.toLowerCase(), onclick: (ev) => { ev.preventDefault(); show(i); } })));
    show(0);
    return [bar, pre];
  }

  function kvTable(id, obj) {
    const body = el('tbody', {});
    for (const [k, v] of Object.entries(obj || {})) {
      body.append(el('tr', {}, el('th', { text: k }), el('td', { text: typeof v === 'string' ? v : JSON.stringify(v) })));
    }
    if (!body.children.length) body.append(el('tr', {}, el('td', { class: 'note', text: 'none' })));
    return el('div', { class: 'scroll' }, el('table', { id }, body));
  }

  async function renderMessages(path, tab, live) {
    const sp = subscriptionParts(path);
    crumbs([['namespace', '#/'], ...(sp ? [[sp.topic, entityHref(sp.topic)], [sp.sub, entityHref(path)]] : [[path, entityHref(path)]]), ['messages', null]]);
    const app = $('app');
    let got;
    try {
      got = await getEntity(path);
    } catch (e) {
      if (!live()) return;
      showError(e);
      // A key without Manage cannot read the description but may still browse and send.
      if (e.status !== 401) { app.replaceChildren(el('p', { class: 'note', text: 'Nothing to show.' })); return; }
      got = { kind: 'unknown' };
    }
    if (!live()) return;
    const isTopic = got.kind === 'topic';
    if (isTopic) tab = 'send';
    const tabs = el('div', { class: 'tabs', id: 'tabs' }, ...TABS.filter(([t]) => !isTopic || t === 'send').map(([t, label]) => el('a', { href: messagesHref(path, t), class: t === tab ? 'active' : '', 'data-tab': t, text: label })));
    app.replaceChildren(el('h1', { text: path }), tabs);
    if (tab === 'send') { app.append(sendForm(path)); return; }

    const dead = tab === 'dead';
    const browsePath = dead ? path + '/$DeadLetterQueue' : path;
    const wantState = { active: 'Active', scheduled: 'Scheduled', deferred: 'Deferred' }[tab];
    let next = 0, done = false;
    const shown = [];
    const body = el('tbody', { id: 'messages' });
    const detail = el('div', { id: 'detail' });
    const more = el('button', { type: 'button', id: 'more', text: 'More' });
    const countNote = el('span', { class: 'note', id: 'count-note' });

    function openDetail(m, tr) {
      [...body.children].forEach((r) => r.classList.remove('selected'));
      tr.classList.add('selected');
      const bp = m.BrokerProperties || {};
      const actions = el('div', { class: 'row' });
      if (dead) {
        actions.append(el('button', { type: 'button', id: 'resubmit-one', class: 'primary', text: 'Resubmit', onclick: async () => {
          if (!await confirmOnce('Resubmit dead letter ' + bp.SequenceNumber + ' to ' + path + '?')) return;
          const ok = await guarded(() => api('POST', pathURL(browsePath) + '/messages/$resubmit/' + bp.SequenceNumber));
          if (ok) reload();
        } }));
      }
      if (bp.State === 'Scheduled') {
        actions.append(el('button', { type: 'button', id: 'cancel-scheduled', class: 'danger', text: 'Cancel scheduled message', onclick: async () => {
          if (!await confirmOnce('Cancel scheduled message ' + bp.SequenceNumber + '? It will be deleted.')) return;
          const ok = await guarded(() => api('DELETE', pathURL(path) + '/messages/$scheduled/' + bp.SequenceNumber));
          if (ok) reload();
        } }));
      }
      detail.replaceChildren(el('div', { class: 'card' },
        el('h2', { text: 'Message ' + (bp.SequenceNumber ?? '') }),
        dead ? el('p', { id: 'dl-reason' }, el('strong', { text: 'Dead-letter reason: ' }), el('span', { text: bp.DeadLetterReason || '' }), el('br'),
          el('strong', { text: 'Description: ' }), el('span', { text: bp.DeadLetterErrorDescription || '' })) : null,
        actions,
        el('h2', { text: 'Body' + (m.ContentType ? ' (' + m.ContentType + ')' : '') }), ...bodyView(m),
        el('h2', { text: 'Broker properties' }), kvTable('broker-props', bp),
        el('h2', { text: 'User properties' }), kvTable('user-props', m.UserProperties)));
    }

    function addRow(m) {
      const bp = m.BrokerProperties || {};
      const bytes = bodyBytes(m);
      const preview = bytes ? '(' + bytes.length + ' bytes) ' + [...bytes.slice(0, 12)].map((b) => b.toString(16).padStart(2, '0')).join('')
        : (m.Body || '').slice(0, 80).replace(/[\u0000-\u001f\u007f]/g, '·');
      const tr = el('tr', { class: 'clickable', tabIndex: 0, 'data-seq': bp.SequenceNumber },
        el('td', { class: 'num', text: bp.SequenceNumber ?? '' }),
        el('td', { class: 'nowrap', text: bp.EnqueuedTimeUtc || '' }),
        el('td', { text: bp.MessageId || '' }),
        el('td', { text: bp.Label || '' }),
        dead ? el('td', { text: bp.DeadLetterReason || '' }) : el('td', { text: tab === 'scheduled' ? (bp.ScheduledEnqueueTimeUtc || '') : String(bp.DeliveryCount ?? '') }),
        el('td', { class: 'preview', text: preview }));
      tr.addEventListener('click', () => openDetail(m, tr));
      tr.addEventListener('keydown', (ev) => { if (ev.key === 'Enter') openDetail(m, tr); });
      body.append(tr);
    }

    async function loadMore() {
      await guarded(async () => {
        let added = 0;
        while (!done && added < 50) {
          const r = await api('GET', pathURL(browsePath) + '/messages/$browse?from=' + next + '&count=1000');
          if (!live()) return;
          const list = JSON.parse(r.text || '[]');
          if (list.length < 1000) done = true;
          for (const m of list) {
            const bp = m.BrokerProperties || {};
            next = Math.max(next, (bp.SequenceNumber || 0) + 1);
            if (wantState && (bp.State || 'Active') !== wantState) continue;
            shown.push(m); addRow(m); added++;
          }
        }
        more.hidden = done;
        countNote.textContent = shown.length + ' shown' + (done ? '' : ', more to load');
        if (!body.children.length) body.append(el('tr', {}, el('td', { colSpan: 6, class: 'note', text: 'No messages here.' })));
      });
    }
    // After an action the page is drawn again, unless the user has gone elsewhere meanwhile.
    function reload() { return live() ? route() : Promise.resolve(); }
    more.addEventListener('click', () => { if (body.querySelector('td[colspan]')) body.replaceChildren(); loadMore(); });

    const bulk = el('div', { class: 'row' });
    if (dead) {
      const filter = el('input', { id: 'resubmit-filter', placeholder: "filter, e.g. DeadLetterReason = 'MaxDeliveryCountExceeded' (empty: all)", size: 50 });
      bulk.append(filter, el('button', { type: 'button', id: 'resubmit-all', text: 'Resubmit matching', onclick: async () => {
        const f = filter.value.trim();
        if (!await confirmOnce(f ? 'Resubmit every dead letter of ' + path + ' matching ' + f + '?' : 'Resubmit every dead letter of ' + path + '?')) return;
        const r = await guarded(() => api('POST', pathURL(browsePath) + '/messages/$resubmit' + (f ? '?filter=' + encodeURIComponent(f) : '')));
        if (r) {
          await reload();
          const b = $('bulk-msg');
          if (b) b.textContent = 'Resubmitted ' + JSON.parse(r.text).Count + '.';
        }
      } }));
    }
    bulk.append(el('button', { type: 'button', id: 'purge', class: 'danger', text: dead ? 'Purge dead letters' : 'Purge messages', onclick: async () => {
      if (!await confirmOnce(dead ? 'Delete every dead letter of ' + path + '?' : 'Delete every message of ' + path + ' (active, scheduled and deferred)?')) return;
      const r = await guarded(() => api('DELETE', pathURL(browsePath) + '/messages'));
      if (r) {
        await reload();
        const b = $('bulk-msg');
        if (b) b.textContent = 'Purged ' + JSON.parse(r.text).Count + '.';
      }
    } }), el('span', { id: 'bulk-msg', class: 'ok' }));

    app.append(bulk,
      el('div', { class: 'scroll' }, el('table', {},
        el('thead', {}, el('tr', {}, el('th', { class: 'num', text: 'Seq' }), el('th', { text: 'Enqueued' }), el('th', { text: 'Message ID' }), el('th', { text: 'Label' }),
          el('th', { text: dead ? 'Reason' : tab === 'scheduled' ? 'Scheduled for' : 'Deliveries' }), el('th', { text: 'Body' }))),
        body)),
      el('div', { class: 'row' }, more, countNote),
      detail);
    await loadMore();
  }

  function sendForm(path) {
    const f = (id, label, attrs) => [el('label', { for: id, text: label }), el('input', Object.assign({ id }, attrs || {}))];
    const bodyIn = el('textarea', { id: 's-body', rows: 6 });
    const props = el('textarea', { id: 's-props', rows: 3, placeholder: 'one name=value a line; 12 and 12.5 are numbers, true/false booleans, "12" text' });
    const msg = el('div', { id: 'send-msg' });
    const form = el('form', { class: 'card', id: 'send-form', onsubmit: async (ev) => {
      ev.preventDefault();
      msg.textContent = ''; msg.className = '';
      try {
        const bp = {};
        for (const [id, key] of [['s-label', 'Label'], ['s-id', 'MessageId'], ['s-corr', 'CorrelationId'], ['s-session', 'SessionId'], ['s-ct', 'ContentType']]) {
          const v = $(id).value.trim();
          if (v) bp[key] = v;
        }
        const ttl = $('s-ttl').value.trim();
        if (ttl) { if (isNaN(Number(ttl)) || Number(ttl) <= 0) throw new Error('Time to live: a number of seconds.'); bp.TimeToLive = Number(ttl); }
        const at = $('s-schedule').value.trim();
        if (at) { const d = new Date(at); if (isNaN(d)) throw new Error('Schedule: a date such as 2026-01-02T15:04:05Z.'); bp.ScheduledEnqueueTimeUtc = d.toUTCString(); }
        const up = {};
        for (const line of props.value.split('\n')) {
          if (!line.trim()) continue;
          const i = line.indexOf('=');
          if (i <= 0) throw new Error('A user property line must be name=value: "' + line + '"');
          const [t, v] = typedValue(line.slice(i + 1).trim());
          up[line.slice(0, i).trim()] = t === 'string' ? v : t === 'boolean' ? v === 'true' : Number(v);
        }
        const m = { Body: bodyIn.value, BrokerProperties: bp };
        if (Object.keys(up).length) m.UserProperties = up;
        await api('POST', pathURL(path) + '/messages', { headers: { 'Content-Type': 'application/vnd.microsoft.servicebus.json' }, body: JSON.stringify([m]) });
        msg.textContent = 'Sent.'; msg.className = 'ok';
      } catch (e) {
        msg.textContent = e.message; msg.className = 'err';
      }
    } },
    el('h2', { text: 'Send a message to ' + path }),
    el('label', { for: 's-body', text: 'Body' }), bodyIn,
    el('div', { class: 'form' },
      ...f('s-ct', 'Content type', { placeholder: 'text/plain' }), ...f('s-label', 'Label'), ...f('s-id', 'Message ID'), ...f('s-corr', 'Correlation ID'),
      ...f('s-session', 'Session ID'), ...f('s-ttl', 'Time to live (s)'), ...f('s-schedule', 'Schedule at', { placeholder: '2026-01-02T15:04:05Z' }),
      el('label', { for: 's-props', text: 'User properties' }), props),
    el('div', { class: 'row' }, el('button', { type: 'submit', id: 'send', class: 'primary', text: 'Send' })), msg);
    return form;
  }

  // ---- routing -------------------------------------------------------------------------------

  // Each drawing of a page has a number; an answer that arrives after the user moved on is
  // dropped (live() is false) instead of drawing an old page over the new one.
  let renderSeq = 0;
  function route() {
    stopTimers();
    clearError();
    const seq = ++renderSeq;
    const live = () => seq === renderSeq;
    $('app').removeAttribute('data-ready');
    if (!session.key) { renderSignIn(); return Promise.resolve(); }
    $('who').textContent = 'key: ' + session.keyName;
    $('signout').hidden = false;
    const h = location.hash.replace(/^#/, '') || '/';
    const [p, q] = h.split('?');
    const params = new URLSearchParams(q || '');
    let m, done;
    if ((m = /^\/entity\/(.+)$/.exec(p))) done = renderEntity(decodeURIComponent(m[1]), live);
    else if ((m = /^\/messages\/(.+)$/.exec(p))) done = renderMessages(decodeURIComponent(m[1]), params.get('tab') || 'active', live);
    else done = renderNamespace();
    // data-ready tells a test (or a curious reader) which page is completely drawn.
    return Promise.resolve(done).then(() => { if (live()) $('app').dataset.ready = location.hash || '#/'; });
  }

  document.addEventListener('keydown', (ev) => {
    const t = ev.target;
    if (t && (t.tagName === 'INPUT' || t.tagName === 'TEXTAREA' || t.tagName === 'SELECT')) return;
    if (ev.key === '/' && $('filter')) { ev.preventDefault(); $('filter').focus(); }
    else if (ev.key === 'r' && $('refresh')) { $('refresh').click(); }
  });
  $('signout').addEventListener('click', () => {
    session.key = null; session.keyName = ''; session.token = '';
    samples.clear();
    location.hash = '#/';
    route();
  });
  window.addEventListener('hashchange', route);
  route();
})();
