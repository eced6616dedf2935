-- A headless Neovim session with ckptlint's server configured as docs/editor.md says, for
-- the Neovim running it (0.11's vim.lsp.config, else the FileType autocommand of older ones).
-- Driven by tests/test_neovim.py: it opens the project's files, waits for the diagnostics
-- the test expects (vim.wait: a safety timeout only) and writes what it saw as JSON.
local root = vim.env.CKPTLINT_TEST_ROOT
local out = vim.env.CKPTLINT_TEST_OUT
local cmd = vim.json and vim.json.decode(vim.env.CKPTLINT_TEST_CMD) or vim.fn.json_decode(vim.env.CKPTLINT_TEST_CMD)
local seen = { version = tostring(vim.version().major) .. "." .. tostring(vim.version().minor) }
local SAFETY = 120000

local function finish()
  vim.fn.writefile({ vim.fn.json_encode(seen) }, out)
  vim.cmd("qall!")
end

-- The configuration of docs/editor.md.
if vim.fn.has("nvim-0.11") == 1 then
  vim.lsp.config("ckptlint", {
    cmd = cmd,
    filetypes = { "python" },
    root_markers = { "pyproject.toml", "setup.cfg", "setup.py", ".git" },
    init_options = { ["target-versions"] = { torch = "2.4" } },
  })
  vim.lsp.enable("ckptlint")
else
  local clients = {}
  vim.api.nvim_create_autocmd("FileType", {
    pattern = "python",
    callback = function(args)
      local file = vim.api.nvim_buf_get_name(args.buf)
      local marker = vim.fn.findfile("pyproject.toml", vim.fn.fnamemodify(file, ":p:h") .. ";")
      local root_dir = marker ~= "" and vim.fn.fnamemodify(marker, ":p:h") or vim.fn.getcwd()
      if not clients[root_dir] then
        clients[root_dir] = vim.lsp.start_client({ name = "ckptlint", cmd = cmd, root_dir = root_dir })
      end
      vim.lsp.buf_attach_client(args.buf, clients[root_dir])
    end,
  })
end

local function codes(buf)
  local found = {}
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    table.insert(found, d.code or (d.user_data and d.user_data.lsp and d.user_data.lsp.code) or "?")
  end
  table.sort(found)
  return table.concat(found, ",")
end

local function wait_for(buf, expected, what)
  local ok = vim.wait(SAFETY, function() return codes(buf) == expected end, 20)
  seen[what] = codes(buf)
  if not ok then
    seen.failed = what
    finish()
  end
end

local ok, err = pcall(function()
  vim.cmd("edit " .. vim.fn.fnameescape(root .. "/pkg/model.py"))
  local model = vim.api.nvim_get_current_buf()
  wait_for(model, "CKPT001", "opened")
  -- An unsaved edit: the finding goes.
  local line = vim.fn.search("checkpoint(block, x)")
  local text = vim.api.nvim_buf_get_lines(model, line - 1, line, false)[1]
  vim.api.nvim_buf_set_lines(model, line - 1, line, false, { (text:gsub("checkpoint%(block, x%)", "checkpoint(block, x, use_reentrant=False)")) })
  wait_for(model, "", "edited")
  vim.cmd("silent undo")
  wait_for(model, "CKPT001", "undone")
  -- Another buffer's unsaved text counts: train.py wraps the model in FSDP.
  vim.cmd("split " .. vim.fn.fnameescape(root .. "/train.py"))
  local train = vim.api.nvim_get_current_buf()
  vim.api.nvim_buf_set_lines(train, 0, -1, false, {
    "from torch.distributed.fsdp import FullyShardedDataParallel as FSDP",
    "",
    "from pkg.model import Model",
    "",
    "",
    "def main():",
    "    return FSDP(Model())",
  })
  wait_for(model, "CKPT002", "other buffer edited")
  -- The quick fix, applied through Neovim's code action.
  vim.api.nvim_set_current_win(vim.fn.bufwinid(model))
  vim.api.nvim_win_set_cursor(0, { line, 20 })
  local applied = false
  local client = vim.lsp.get_active_clients and vim.lsp.get_active_clients()[1] or vim.lsp.get_clients()[1]
  local params = vim.lsp.util.make_range_params(0, client and client.offset_encoding or "utf-16")
  params.context = { diagnostics = {}, only = { "quickfix" } }
  local response = vim.lsp.buf_request_sync(model, "textDocument/codeAction", params, SAFETY)
  for _, result in pairs(response or {}) do
    for _, action in ipairs(result.result or {}) do
      if not applied and action.edit and not action.title:find("noqa") then
        vim.lsp.util.apply_workspace_edit(action.edit, client and client.offset_encoding or "utf-16")
        applied = true
      end
    end
  end
  seen.fixed_line = vim.api.nvim_buf_get_lines(model, line - 1, line, false)[1]
  wait_for(model, "", "fixed")
end)
if not ok then
  seen.error = tostring(err)
end
finish()
