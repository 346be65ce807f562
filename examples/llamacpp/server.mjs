// A llama-server look-alike on node-llama-cpp, for the parts bmx uses: the
// same flags (-m, --host, --port, -fa, -ctk, -ctv, -t, -c), GET /health (503
// "Loading model" while loading, then 200), GET /v1/models and POST
// /v1/chat/completions in the OpenAI shape. llama.cpp's own log lines go to
// stderr unchanged, so a sweep's crash signatures are the engine's words. A
// context that cannot be created exits 1 after printing them.
//
// The model has no chat template: the last user message is the raw prompt,
// continued greedily when temperature is (near) 0. With logprobs (and
// top_logprobs) each generated token comes back with its logprob and the
// most likely candidates, from node-llama-cpp's per-step probabilities.
//
// With "stream": true the answer comes as server-sent events, as
// llama-server sends them: a chunk with the role, a chunk per token of text,
// a chunk with the finish reason, the usage in a last chunk without choices
// when stream_options.include_usage asks for it, then [DONE]. Streams carry
// no logprobs. "ignore_eos": true keeps generating past the end-of-sequence
// token until max_tokens: node-llama-cpp cannot mask that token's logit
// (llama-server does), so here it is sampled, counted, and generation goes
// on after it.
import http from "node:http";
import path from "node:path";

const usage = `usage: server.mjs -m MODEL [--host HOST] [--port PORT] [-fa on|off|auto]
                  [-ctk TYPE] [-ctv TYPE] [-t THREADS] [-c CTX_SIZE]
cache types: f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1`;

const cacheTypes = {f32: "F32", f16: "F16", bf16: "BF16", q8_0: "Q8_0", q4_0: "Q4_0", q4_1: "Q4_1", iq4_nl: "IQ4_NL", q5_0: "Q5_0", q5_1: "Q5_1"};

function fail(msg) {
    process.stderr.write(`${usage}\nerror: ${msg}\n`);
    process.exit(1);
}

function parseArgs(argv) {
    const opts = {model: "", host: "127.0.0.1", port: 8080, flashAttn: "auto", cacheK: "f16", cacheV: "f16", threads: 1, ctxSize: 512};
    const flags = {
        "-m": "model", "--model": "model", "--host": "host", "--port": "port",
        "-fa": "flashAttn", "--flash-attn": "flashAttn", "-ctk": "cacheK", "--cache-type-k": "cacheK",
        "-ctv": "cacheV", "--cache-type-v": "cacheV", "-t": "threads", "--threads": "threads", "-c": "ctxSize", "--ctx-size": "ctxSize",
    };
    for (let i = 0; i < argv.length; i++) {
        let [name, value] = argv[i].split(/=(.*)/s);
        const key = flags[name];
        if (key === undefined) fail(`invalid argument: ${argv[i]}`);
        if (value === undefined) {
            if (i + 1 >= argv.length) fail(`expected value for argument ${name}`);
            value = argv[++i];
        }
        opts[key] = value;
    }
    if (!opts.model) fail("no model given (-m)");
    if (!["on", "off", "auto"].includes(opts.flashAttn)) fail(`invalid value for -fa: ${opts.flashAttn} (on, off or auto)`);
    for (const k of ["cacheK", "cacheV"])
        if (!(opts[k] in cacheTypes)) fail(`unsupported cache type: ${opts[k]}`);
    for (const k of ["port", "threads", "ctxSize"]) {
        opts[k] = Number(opts[k]);
        if (!Number.isInteger(opts[k]) || opts[k] < 0) fail(`invalid number for ${k}`);
    }
    return opts;
}

const opts = parseArgs(process.argv.slice(2));
for (const sig of ["SIGTERM", "SIGINT"])
    process.on(sig, () => {
        process.stderr.write(`srv    operator(): received ${sig}, shutting down\n`);
        process.exit(0);
    });

let state = "loading"; // then "ready"
let model, sequence;
let queue = Promise.resolve(); // one request at a time, as one slot of llama-server

function send(res, status, obj) {
    const body = JSON.stringify(obj);
    res.writeHead(status, {"Content-Type": "application/json", "Content-Length": Buffer.byteLength(body)});
    res.end(body);
}

class BadRequest extends Error {}

// logprobOptions reads the OpenAI logprobs fields: logprobs (bool) and
// top_logprobs (0 to 20, as OpenAI allows; it implies logprobs, as in
// llama-server).
function logprobOptions(req) {
    const k = req.top_logprobs ?? 0;
    if (!Number.isInteger(k) || k < 0 || k > 20) throw new BadRequest("top_logprobs must be an integer from 0 to 20");
    return {want: req.logprobs === true || k > 0, topK: k};
}

// tokenPiece is a token's text as it continues the tokens before it
// (leading space included, as llama-server's common_token_to_piece gives).
function tokenPiece(token, before) {
    return model.detokenize([token], false, before.slice(-8));
}

// logprobEntry is one generated token in llama-server's OpenAI shape:
// its logprob and the topK most likely tokens at that step. The
// probabilities are llama.cpp's softmax over the whole vocabulary of the
// raw logits (no temperature: the request is greedy or the figures are
// the model's own), sorted most likely first.
function logprobEntry(token, probabilities, topK, before) {
    const piece = (t) => tokenPiece(t, before);
    const entry = (t, p) => ({id: t, token: piece(t), bytes: [...Buffer.from(piece(t), "utf8")], logprob: Math.log(p)});
    const top = [];
    for (const [t, p] of probabilities) {
        if (top.length >= topK) break;
        top.push(entry(t, p));
    }
    return {...entry(token, probabilities.get(token) ?? 0), top_logprobs: top};
}

// complete generates the answer to a chat request. onText, when given,
// receives each new piece of text as it is generated (a stream); it
// returns false when the client has gone, which stops generation.
async function complete(req, onText) {
    const msgs = Array.isArray(req.messages) ? req.messages : [];
    const last = [...msgs].reverse().find((m) => m.role === "user");
    const prompt = typeof last?.content === "string" ? last.content : (last?.content ?? []).map((p) => p.text ?? "").join("");
    const maxTokens = Number(req.max_tokens ?? req.max_completion_tokens ?? 128);
    const temperature = Number(req.temperature ?? 0.8);
    const ignoreEOS = req.ignore_eos === true;
    const lp = onText ? {want: false, topK: 0} : logprobOptions(req);
    await sequence.clearHistory();
    const tokens = [];
    const content = [];
    let finish = "stop";
    let sent = "";
    const input = model.tokenize(prompt);
    const options = {temperature: temperature <= 1e-5 ? 0 : temperature, seed: req.seed, yieldEogToken: ignoreEOS};
    const steps = lp.want
        ? sequence.evaluateWithMetadata(input, {probabilities: true}, options)
        : sequence.evaluate(input, options);
    for await (const step of steps) {
        const t = lp.want ? step.token : step;
        if (model.isEogToken(t) && !ignoreEOS) break;
        if (lp.want) content.push(logprobEntry(t, step.probabilities, lp.topK, [...input, ...tokens]));
        tokens.push(t);
        if (onText) {
            // The text so far, less what was sent; a token that ends
            // inside a UTF-8 character waits for the rest of it.
            const text = model.detokenize(tokens.filter((x) => !model.isEogToken(x)));
            if (text.length > sent.length && !text.endsWith("\uFFFD")) {
                if (!onText(text.slice(sent.length))) return null;
                sent = text;
            }
        }
        if (tokens.length >= maxTokens) {
            finish = "length";
            break;
        }
    }
    const choice = {index: 0, message: {role: "assistant", content: model.detokenize(tokens.filter((x) => !model.isEogToken(x)))}, finish_reason: finish};
    if (lp.want) choice.logprobs = {content};
    return {
        id: `chatcmpl-${Date.now()}`, object: "chat.completion", created: Math.floor(Date.now() / 1000),
        model: path.basename(opts.model), system_fingerprint: "node-llama-cpp-3.21.1",
        choices: [choice],
        usage: {prompt_tokens: input.length, completion_tokens: tokens.length, total_tokens: input.length + tokens.length},
    };
}

// stream answers a chat request with server-sent events.
async function stream(req, res) {
    const id = `chatcmpl-${Date.now()}`;
    const created = Math.floor(Date.now() / 1000);
    const chunk = (choices, usage) => res.write(`data: ${JSON.stringify({
        id, object: "chat.completion.chunk", created, model: path.basename(opts.model), system_fingerprint: "node-llama-cpp-3.21.1", choices,
        ...(usage ? {usage} : {}),
    })}\n\n`);
    res.writeHead(200, {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"});
    chunk([{index: 0, delta: {role: "assistant", content: null}, finish_reason: null}]);
    const out = await complete(req, (text) => {
        if (res.destroyed) return false;
        chunk([{index: 0, delta: {content: text}, finish_reason: null}]);
        return true;
    });
    if (out === null) return;
    chunk([{index: 0, delta: {}, finish_reason: out.choices[0].finish_reason}]);
    if (req.stream_options?.include_usage === true) chunk([], out.usage);
    res.end("data: [DONE]\n\n");
}

const server = http.createServer((req, res) => {
    const url = new URL(req.url, "http://x");
    if (req.method === "GET" && url.pathname === "/health") {
        if (state !== "ready") return send(res, 503, {error: {code: 503, message: "Loading model", type: "unavailable_error"}});
        return send(res, 200, {status: "ok"});
    }
    if (req.method === "GET" && url.pathname === "/v1/models") {
        return send(res, 200, {object: "list", data: [{id: path.basename(opts.model), object: "model", created: 0, owned_by: "llamacpp"}]});
    }
    if (req.method === "POST" && url.pathname === "/v1/chat/completions") {
        let body = "";
        req.on("data", (c) => (body += c));
        req.on("end", () => {
            if (state !== "ready") return send(res, 503, {error: {code: 503, message: "Loading model", type: "unavailable_error"}});
            let parsed;
            try {
                parsed = JSON.parse(body);
            } catch (e) {
                return send(res, 400, {error: {code: 400, message: `invalid JSON: ${e.message}`, type: "invalid_request_error"}});
            }
            const answer = parsed.stream === true ? () => stream(parsed, res) : () => complete(parsed).then((out) => send(res, 200, out));
            queue = queue.then(answer).then(
                () => {},
                (e) => res.headersSent
                    ? res.end(`data: ${JSON.stringify({error: {code: 500, message: String(e?.message ?? e), type: "server_error"}})}\n\n`)
                    : e instanceof BadRequest
                    ? send(res, 400, {error: {code: 400, message: e.message, type: "invalid_request_error"}})
                    : send(res, 500, {error: {code: 500, message: String(e?.message ?? e), type: "server_error"}}),
            );
        });
        return;
    }
    send(res, 404, {error: {code: 404, message: "File Not Found", type: "not_found_error"}});
});

server.listen(opts.port, opts.host, async () => {
    process.stderr.write(`main: server is listening on http://${opts.host}:${opts.port} - starting the main loop\n`);
    try {
        // Imported only now: a bad flag is refused at once, without the
        // second or so node-llama-cpp takes to load.
        const {getLlama, LlamaLogLevel} = await import("node-llama-cpp");
        const llama = await getLlama({
            gpu: false, build: "never", maxThreads: opts.threads, logLevel: LlamaLogLevel.warn,
            logger: (level, message) => process.stderr.write(message.endsWith("\n") ? message : message + "\n"),
        });
        model = await llama.loadModel({modelPath: opts.model});
        const context = await model.createContext({
            contextSize: opts.ctxSize, threads: opts.threads,
            flashAttention: opts.flashAttn === "auto" ? "auto" : opts.flashAttn === "on",
            experimentalKvCacheKeyType: cacheTypes[opts.cacheK], experimentalKvCacheValueType: cacheTypes[opts.cacheV],
        });
        sequence = context.getSequence();
    } catch (e) {
        process.stderr.write(`common_init_from_params: failed to create context with model '${opts.model}' (${e?.message ?? e})\n`);
        process.stderr.write(`srv    load_model: failed to load model, '${opts.model}'\n`);
        process.stderr.write("main: exiting due to model loading error\n");
        process.exit(1);
    }
    state = "ready";
    process.stderr.write("main: model loaded\nsrv  update_slots: all slots are idle\n");
});
