//! The server id when `--server-id` is not given: `agentsh::launch::derive_server_id` on the
//! command line (`npx -y @modelcontextprotocol/server-filesystem` -> `filesystem`), so the shim
//! and the launcher shims of `agentshctl run` name a server alike.

use std::ffi::OsString;

/// Arguments that are not UTF-8 are read lossily: an id only needs to be stable and readable.
pub fn derive(program: &OsString, args: &[OsString]) -> String {
    let lossy = |s: &OsString| s.to_string_lossy().into_owned();
    let args: Vec<String> = args.iter().map(lossy).collect();
    agentsh::launch::derive_server_id(&lossy(program), &args)
}

#[cfg(test)]
mod tests {
    use std::os::unix::ffi::OsStringExt;

    use super::*;

    fn id(cmd: &[&str]) -> String {
        let v: Vec<OsString> = cmd.iter().map(OsString::from).collect();
        derive(&v[0], &v[1..])
    }

    #[test]
    fn ids_come_from_packages_modules_and_scripts() {
        assert_eq!(
            id(&[
                "npx",
                "-y",
                "@modelcontextprotocol/server-filesystem",
                "/tmp"
            ]),
            "filesystem"
        );
        assert_eq!(id(&["uvx", "mcp-server-fetch@1.0"]), "fetch");
        assert_eq!(id(&["python3", "-m", "mcp_server_git"]), "git");
        assert_eq!(
            id(&[
                "/usr/bin/node",
                "/x/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
            ]),
            "everything"
        );
        assert_eq!(id(&["node", "servers/poison.mjs"]), "poison");
        assert_eq!(id(&["/usr/local/bin/my-tool", "--flag"]), "my-tool");
        assert_eq!(id(&["weird name!"]), "weirdname");
    }

    #[test]
    fn non_utf8_arguments_are_read_lossily() {
        let program = OsString::from("node");
        let script = OsString::from_vec(b"/srv/mcp-server-\xffx/index.js".to_vec());
        assert_eq!(derive(&program, &[script]), "x");
    }
}
