-- Headless Neovim timing the diagnostics of edits of transformers' trainer.py, with
-- ckptlint's server configured as docs/editor.md says (Neovim 0.11's vim.lsp.config).
-- Driven by benchmarks/editor_neovim.py, which reads the JSON it writes.
local root = vim.env.CKPTLINT_BENCH_ROOT
local out = vim.env.CKPTLINT_BENCH_OUT
local cmd = vim.json.decode(vim.env.CKPTLINT_BENCH_CMD)
local SAFETY = 600000
local seen = { version = tostring(vim.version().major) .. "." .. tostring(vim.version().minor), edits = {} }
local published = {} -- buffer version -> when its diagnostics arrived (ms)
local now = function() return vim.uv.hrtime() / 1e6 end

vim.lsp.config("ckptlint", {
  cmd = cmd,
  filetypes = { "python" },
  root_markers = { "pyproject.toml", "setup.cfg", "setup.py", ".git" },
})
vim.lsp.enable("ckptlint")

local default = vim.lsp.handlers["textDocument/publishDiagnostics"]
vim.lsp.handlers["textDocument/publishDiagnostics"] = function(err, result, ctx, config)
  if result and result.version then
    published[result.version] = published[result.version] or now()
  end
  published.any = now()
  return default(err, result, ctx, config)
end

local function finish()
  vim.fn.writefile({ vim.json.encode(seen) }, out)
  vim.cmd("qall!")
end

local function edit_and_time(buf, what, change)
  change()
  local started = now()
  local version = vim.b[buf].changedtick
  local ok = vim.wait(SAFETY, function() return published[version] ~= nil end, 5)
  table.insert(seen.edits, { what = what, seconds = ok and (published[version] - started) / 1000 or -1 })
end

local ok, err = pcall(function()
  local t0 = now()
  vim.cmd("edit " .. vim.fn.fnameescape(root .. "/transformers/trainer.py"))
  local buf = vim.api.nvim_get_current_buf()
  vim.wait(SAFETY, function() return published.any ~= nil end, 20)
  seen.first = (now() - t0) / 1000
  vim.wait(1500, function() return false end) -- the facts that follow the first lint
  local last = vim.api.nvim_buf_line_count(buf)
  for n = 1, 4 do
    edit_and_time(buf, "comment appended", function()
      vim.api.nvim_buf_set_lines(buf, last, last, false, { "# edit " .. n })
      last = last + 1
    end)
    vim.wait(300, function() return false end)
  end
  -- The first line of `Trainer._inner_training_loop`'s body: below the `):` ending its signature.
  local body
  for line = vim.fn.search("def _inner_training_loop", "nw"), last do
    if vim.api.nvim_buf_get_lines(buf, line - 1, line, false)[1]:match("^    %).*:$") then
      body = line
      break
    end
  end
  for n = 1, 4 do
    edit_and_time(buf, "statement typed", function()
      vim.api.nvim_buf_set_lines(buf, body, body, false, { "        steps_seen_" .. n .. " = " .. n })
    end)
    vim.wait(300, function() return false end)
  end
end)
if not ok then
  seen.error = tostring(err)
end
finish()
