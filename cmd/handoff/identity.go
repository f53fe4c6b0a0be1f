package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/handoff-run/handoff/client"
	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/auth"
)

// identityCmds are device, login and secret.
func (c *cli) identityCmds() []*cobra.Command {
	return []*cobra.Command{c.deviceCmd(), c.loginCmd(), c.secretCmd()}
}

// ---- where the credential comes from ----

// configFile is what `handoff login` stores: one server and its
// credential, a token or a device value.
type configFile struct {
	Server string `json:"server"`
	Token  string `json:"token,omitempty"`
	Device string `json:"device,omitempty"`
}

const (
	configDirName  = "handoff"
	configFileName = "config.json"
)

// credential is what a command talks to the server with.
type credential struct {
	server string // "" is client.DefaultServer
	token  string
	device string // a HANDOFF_DEVICE value
	source string // where the token or device came from, for messages
	err    error  // the credential could not be read
}

// credentials resolves the server and the credential: the flags, then
// HANDOFF_SERVER and HANDOFF_TOKEN / HANDOFF_DEVICE, then the config file
// of `handoff login`. The file's credential is only used for the server it
// was stored for, so pointing a command at another server never sends it
// there.
func (c *cli) credentials() credential {
	pf := c.root.PersistentFlags()
	var cr credential
	serverGiven := true
	switch {
	case pf.Changed("server"):
		cr.server = c.server
	case c.getenv("HANDOFF_SERVER") != "":
		cr.server = c.getenv("HANDOFF_SERVER")
	default:
		serverGiven = false
	}
	credGiven := true
	switch {
	case pf.Changed("token"):
		cr.token, cr.source = strings.TrimSpace(c.token), "--token"
	case strings.TrimSpace(c.getenv("HANDOFF_TOKEN")) != "":
		cr.token, cr.source = strings.TrimSpace(c.getenv("HANDOFF_TOKEN")), "HANDOFF_TOKEN"
	case strings.TrimSpace(c.getenv("HANDOFF_DEVICE")) != "":
		cr.device, cr.source = strings.TrimSpace(c.getenv("HANDOFF_DEVICE")), "HANDOFF_DEVICE"
	default:
		credGiven = false
	}
	if serverGiven && credGiven {
		return cr
	}
	cfg, path, err := c.loadConfig()
	if err != nil {
		if !credGiven {
			cr.err = err
		}
		return cr
	}
	if cfg == nil {
		return cr
	}
	if !serverGiven {
		cr.server = cfg.Server
	}
	if credGiven || client.NormalizeURL(cr.server) != client.NormalizeURL(cfg.Server) {
		return cr // the stored credential is not wanted, or belongs to another server
	}
	cr.token, cr.device, cr.source = strings.TrimSpace(cfg.Token), strings.TrimSpace(cfg.Device), path
	return cr
}

// newClient is an API client for cr.
func (c *cli) newClient(cr credential) *client.Client {
	opts := []client.Option{client.WithPath("cli"), client.WithUserAgent("handoff-cli/" + versionString())}
	token := ""
	switch {
	case cr.err != nil:
		opts = append(opts, client.WithCredentialError(cr.err))
	case cr.device != "":
		k, err := auth.ParseDeviceKey(cr.device)
		if err != nil {
			opts = append(opts, client.WithCredentialError(errs.New(errs.Unauthorized, "%s: %v", cr.source, err)))
		} else {
			opts = append(opts, client.WithDevice(k))
		}
	default:
		token = cr.token
	}
	return client.New(cr.server, token, opts...)
}

// configPath is os.UserConfigDir()/handoff/config.json, read through the
// command's environment so tests can point it elsewhere.
func (c *cli) configPath() (string, error) {
	var dir string
	switch runtime.GOOS {
	case "windows", "darwin", "ios", "plan9":
		d, err := os.UserConfigDir()
		if err != nil {
			return "", err
		}
		dir = d
	default:
		dir = c.getenv("XDG_CONFIG_HOME")
		if dir == "" || !filepath.IsAbs(dir) {
			home := c.getenv("HOME")
			if home == "" {
				return "", errors.New("neither $XDG_CONFIG_HOME nor $HOME is set")
			}
			dir = filepath.Join(home, ".config")
		}
	}
	return filepath.Join(dir, configDirName, configFileName), nil
}

// loadConfig reads the config file; nil without error when there is none.
func (c *cli) loadConfig() (*configFile, string, error) {
	path, err := c.configPath()
	if err != nil {
		return nil, "", nil // no place for a config file: nothing stored
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, path, nil
	}
	if err != nil {
		return nil, path, errs.New(errs.Invalid, "cannot read the config file %s: %v; fix its permissions or run `handoff login` again", path, err)
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		fmt.Fprintf(c.stderr, "warning: %s holds a credential and others may read it; run: chmod 600 %s\n", path, path)
	}
	var cfg configFile
	if err := json.Unmarshal(b, &cfg); err != nil {
		return nil, path, errs.New(errs.Invalid, "the config file %s is damaged (%v); run `handoff login` again", path, err)
	}
	return &cfg, path, nil
}

// saveConfig writes cfg with mode 0600 in a directory of mode 0700,
// through a temporary file so a crash never leaves half a file.
func (c *cli) saveConfig(cfg configFile) (string, error) {
	path, err := c.configPath()
	if err != nil {
		return "", errs.New(errs.Invalid, "no place for the config file: %v; set $HOME", err)
	}
	dir := filepath.Dir(path)
	fail := func(err error) (string, error) {
		return "", errs.New(errs.Internal, "cannot write the config file %s: %v", path, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fail(err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fail(err)
	}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	f, err := os.CreateTemp(dir, ".config-*.json")
	if err != nil {
		return fail(err)
	}
	tmp := f.Name()
	_, werr := f.Write(append(b, '\n'))
	err = errors.Join(werr, f.Chmod(0o600), f.Sync(), f.Close())
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fail(err)
	}
	return path, nil
}

// readSecretInput reads a secret value: from the terminal without echo
// after prompt, or all of stdin when it is not a terminal. One trailing
// newline (what echo and most editors add) is dropped.
func (c *cli) readSecretInput(prompt string, limit int64) ([]byte, error) {
	if f, ok := c.stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprint(c.stderr, prompt)
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(c.stderr)
		if err != nil {
			return nil, errs.New(errs.Invalid, "cannot read from the terminal: %v", err)
		}
		return b, nil
	}
	b, err := io.ReadAll(io.LimitReader(c.stdin, limit+1))
	if err != nil {
		return nil, errs.New(errs.Invalid, "cannot read standard input: %v", err)
	}
	if int64(len(b)) > limit {
		return nil, errs.New(errs.TooLarge, "standard input is over %d bytes", limit)
	}
	b = bytes.TrimSuffix(b, []byte("\n"))
	b = bytes.TrimSuffix(b, []byte("\r"))
	return b, nil
}

// ---- login ----

func (c *cli) loginCmd() *cobra.Command {
	path, err := c.configPath()
	if err != nil {
		path = "$XDG_CONFIG_HOME/" + configDirName + "/" + configFileName + ", else ~/.config/" + configDirName + "/" + configFileName
	}
	return &cobra.Command{
		Use:   "login [--server URL] [--token TOKEN]",
		Short: "Store a server and its credential in your config file for later commands",
		Long: `Check a credential against the server and store both in your config file
(` + path + `, mode 0600). Later commands use them
when neither flags nor HANDOFF_SERVER, HANDOFF_TOKEN or HANDOFF_DEVICE say
otherwise, and only for the server they were stored for.

The credential is --token, else it is read from standard input: typed
without echo on a terminal, or piped. A HANDOFF_DEVICE value (hdv1....)
works too.`,
		Example: `  handoff login --server https://handoff.example.com < token.txt
  handoff login --server http://127.0.0.1:8080      # asks for the token`,
		Args: noArgs,
		RunE: action(func(cmd *cobra.Command, args []string) error {
			pf := c.root.PersistentFlags()
			server := c.server
			if !pf.Changed("server") {
				server = c.getenv("HANDOFF_SERVER")
			}
			if server == "" {
				if cfg, _, err := c.loadConfig(); err == nil && cfg != nil {
					server = cfg.Server
				}
			}
			server = client.NormalizeURL(server)
			secret := strings.TrimSpace(c.token)
			if !pf.Changed("token") {
				b, err := c.readSecretInput("Token for "+server+" (input hidden): ", 64<<10)
				if err != nil {
					return err
				}
				secret = strings.TrimSpace(string(b))
			}
			if secret == "" {
				return usageError{"no credential given; pass --token TOKEN, or type or pipe it on standard input"}
			}
			cr := credential{server: server, token: secret, source: "the credential given"}
			cfg := configFile{Server: server, Token: secret}
			if strings.HasPrefix(secret, auth.DevicePrefix) {
				cr.token, cr.device = "", secret
				cfg.Token, cfg.Device = "", secret
			}
			id, err := c.newClient(cr).WhoAmI(cmd.Context())
			if err != nil {
				return err
			}
			path, err := c.saveConfig(cfg)
			if err != nil {
				return err
			}
			out := map[string]any{"ok": true, "server": server, "user": id.User, "config": path}
			if id.Device != "" {
				out["device"] = id.Device
			}
			return c.printJSON(out)
		}),
	}
}

// ---- devices ----

func (c *cli) deviceCmd() *cobra.Command {
	var addApp appFlag
	add := &cobra.Command{
		Use:   "add NAME [--app OWNER/NAME]",
		Short: "Make a device key pair here, register its public key, print the HANDOFF_DEVICE value",
		Long: `Make an Ed25519 key pair on this machine, register its public key as your
device NAME (scoped to one app with --app) and print the value to give a
CI runner or script as HANDOFF_DEVICE. The private key is never sent:
each request is signed on its own, for a short time.

Adding a device needs your own token (not another device).`,
		Example: `  handoff device add ci --app alice/jobs
  {"device":"ci","app":"alice/jobs","HANDOFF_DEVICE":"hdv1...."}`,
		Args: exactArgs(1, "NAME"),
		RunE: action(func(cmd *cobra.Command, args []string) error {
			app, err := addApp.optional()
			if err != nil {
				return err
			}
			cl := c.client()
			id, err := cl.WhoAmI(cmd.Context())
			if err != nil {
				return err
			}
			k, err := auth.NewDeviceKey(id.User, args[0])
			if err != nil {
				return errs.New(errs.Internal, "cannot make a key pair: %v", err)
			}
			d, err := cl.AddDevice(cmd.Context(), k, app)
			if err != nil {
				return err
			}
			out := map[string]any{"device": d.Name}
			if d.App != "" {
				out["app"] = d.App
			}
			out["HANDOFF_DEVICE"] = k.Encode()
			if err := c.printJSON(out); err != nil {
				return err
			}
			scope := "everything user " + d.User + " may do"
			if d.App != "" {
				scope = "app " + d.App + " only"
			}
			fmt.Fprintf(c.stderr, "hint: store the HANDOFF_DEVICE value as a secret of the runner (it acts for %s until `handoff device revoke %s`); it is shown only this once\n", scope, d.Name)
			return nil
		}),
	}
	addApp.register(add)
	add.Flags().Lookup("app").Usage = "scope the device to this app (owner/name); it is refused everywhere else"

	list := &cobra.Command{
		Use:   "list",
		Short: "List your devices, revoked ones included",
		Args:  noArgs,
		RunE: action(func(cmd *cobra.Command, args []string) error {
			ds, err := c.client().Devices(cmd.Context())
			if err != nil {
				return err
			}
			return printArray(c.stdout, ds)
		}),
	}

	revoke := &cobra.Command{
		Use:   "revoke NAME",
		Short: "Revoke one of your devices; its next request is refused",
		Args:  exactArgs(1, "NAME"),
		RunE: action(func(cmd *cobra.Command, args []string) error {
			if err := c.client().RevokeDevice(cmd.Context(), args[0]); err != nil {
				return err
			}
			return c.printJSON(map[string]any{"ok": true, "device": args[0]})
		}),
	}
	return group("device", "Manage device credentials for CI runners and scripts", add, list, revoke)
}

// ---- secrets ----

// maxSecretInput bounds what `secret set` reads; the server's own limit
// is lower and says so.
const maxSecretInput = 1 << 20

func (c *cli) secretCmd() *cobra.Command {
	var setApp appFlag
	set := &cobra.Command{
		Use:   "set --app OWNER/NAME NAME",
		Short: "Set a secret of the app from standard input; handlers read ctx.secrets.NAME",
		Long: `Set a secret of the app. The value is read from standard input (typed
without echo on a terminal; one trailing newline is dropped), sent once and
never shown again by any command: handlers read it as ctx.secrets.NAME.`,
		Example: `  printf %s "$STRIPE_KEY" | handoff secret set --app alice/shop STRIPE_KEY`,
		Args:    exactArgs(1, "NAME"),
		RunE: action(func(cmd *cobra.Command, args []string) error {
			app, err := setApp.value()
			if err != nil {
				return err
			}
			v, err := c.readSecretInput("Value of "+args[0]+" (input hidden): ", maxSecretInput)
			if err != nil {
				return err
			}
			if len(v) == 0 {
				return usageError{"no value on standard input; pipe it in: printf %s \"$VALUE\" | handoff secret set --app " + app + " " + args[0]}
			}
			if !utf8.Valid(v) {
				return errs.New(errs.Invalid, "the value is not UTF-8 text; encode binary secrets, e.g. with base64, and decode them in the handler")
			}
			if err := c.client().SetSecret(cmd.Context(), app, args[0], string(v)); err != nil {
				return err
			}
			return c.printJSON(map[string]any{"ok": true, "app": app, "name": args[0]})
		}),
	}
	setApp.register(set)

	var listApp appFlag
	list := &cobra.Command{
		Use:   "list --app OWNER/NAME",
		Short: "List the names of the app's secrets (never their values)",
		Args:  noArgs,
		RunE: action(func(cmd *cobra.Command, args []string) error {
			app, err := listApp.value()
			if err != nil {
				return err
			}
			ss, err := c.client().Secrets(cmd.Context(), app)
			if err != nil {
				return err
			}
			return printArray(c.stdout, ss)
		}),
	}
	listApp.register(list)

	var rmApp appFlag
	rm := &cobra.Command{
		Use:   "rm --app OWNER/NAME NAME",
		Short: "Remove a secret of the app",
		Args:  exactArgs(1, "NAME"),
		RunE: action(func(cmd *cobra.Command, args []string) error {
			app, err := rmApp.value()
			if err != nil {
				return err
			}
			if err := c.client().RemoveSecret(cmd.Context(), app, args[0]); err != nil {
				return err
			}
			return c.printJSON(map[string]any{"ok": true, "app": app, "name": args[0]})
		}),
	}
	rmApp.register(rm)

	return group("secret", "Manage the app's secrets, which its handlers read as ctx.secrets", set, list, rm)
}

// ---- members ----

// memberRemoveCmd is `app member remove`.
func (c *cli) memberRemoveCmd() *cobra.Command {
	var app appFlag
	var role string
	cmd := &cobra.Command{
		Use:   "remove --app OWNER/NAME USER [--role ROLE]",
		Short: "Take a role from a user in an app, or every role without --role",
		Args:  exactArgs(1, "USER"),
		RunE: action(func(cmd *cobra.Command, args []string) error {
			a, err := app.value()
			if err != nil {
				return err
			}
			if err := c.client().RemoveMember(cmd.Context(), a, args[0], role); err != nil {
				return err
			}
			out := map[string]any{"ok": true, "app": a, "user": args[0]}
			if role != "" {
				out["role"] = role
			}
			return c.printJSON(out)
		}),
	}
	app.register(cmd)
	cmd.Flags().StringVar(&role, "role", "", "the role to take (default: every role of the user)")
	return cmd
}
