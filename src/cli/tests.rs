use super::*;
use crate::dns::xdp::Coalescing;

/// Each command takes its own flags, after its name, and clap refuses the others.
#[test]
fn each_command_takes_only_the_flags_it_reads() {
    let parse = |args: &[&str]| {
        let mut all = vec!["clusterset-dns"];
        all.extend_from_slice(args);
        Args::try_parse_from(all).map_err(|e| e.to_string())
    };
    let ok = parse(&[
        "linkerd-bridge",
        "--log-level",
        "debug",
        "--cluster-id",
        "east",
        "--linkerd-cluster-id",
        "west=west.eu",
        "--kubeconfig",
        "k",
        "--halves",
        "import",
        "--default-mode",
        "remote-discovery",
    ])
    .unwrap();
    assert_eq!(ok.log().log_level, LogLevel::Debug);
    let Ok(Run::Bridge(bridge)) = ok.run() else {
        panic!("not the bridge: {ok:?}");
    };
    assert_eq!(bridge.cluster_id.as_deref(), Some("east"));
    assert!(bridge.export.is_none());
    let import = bridge.import.unwrap();
    assert_eq!(import.naming.cluster_ids["west"], "west.eu");
    assert!(parse(&["linkerd-bridge", "--log-format", "json"]).is_ok());
    for (given, says) in [
        (
            &["--file", "f.yaml", "linkerd-bridge"][..],
            "the subcommand 'linkerd-bridge' cannot be used with '--file <PATH>'",
        ),
        (
            &["--log-level", "debug", "zone"][..],
            "the subcommand 'zone' cannot be used with '--log-level",
        ),
        (
            &["linkerd-bridge", "--file", "f.yaml"][..],
            "unexpected argument '--file'",
        ),
        (
            &["linkerd-bridge", "--namespace", "shop"][..],
            "unexpected argument '--namespace'",
        ),
        (
            &["linkerd-bridge", "--listen", "127.0.0.1:53"][..],
            "unexpected argument '--listen'",
        ),
        (
            &["zone", "--listen", "127.0.0.1:53"][..],
            "unexpected argument '--listen'",
        ),
        (
            &["zone", "--admin-listen", "127.0.0.1:0"][..],
            "unexpected argument '--admin-listen'",
        ),
        (
            &["--halves", "export"][..],
            "unexpected argument '--halves'",
        ),
    ] {
        let e = parse(given).unwrap_err();
        assert!(e.contains(says), "{given:?}: {e}");
    }
    // The DNS server takes them, with or without its command's name.
    for serve in [
        &["--file", "f.yaml"][..],
        &["serve", "--file", "f.yaml"][..],
    ] {
        let a = parse(serve).unwrap();
        assert!(matches!(a.run(), Ok(Run::Serve(c)) if matches!(c.origin, Origin::File(_))));
    }
    let z = parse(&[
        "zone",
        "--file",
        "f.yaml",
        "--timeout",
        "5s",
        "--zone",
        "a.local",
    ])
    .unwrap();
    let Ok(Run::Zone { input, timeout }) = z.run() else {
        panic!("not zone: {z:?}");
    };
    assert_eq!(timeout, Duration::from_secs(5));
    assert_eq!(input.zone.zones, Zones::parse(&["a.local"]).unwrap());
}

#[test]
fn xdp_coalescing_is_adaptive_by_default() {
    let a = Args::try_parse_from(["clusterset-dns", "--file", "f"]).unwrap();
    assert_eq!(
        a.serve.serving.xdp_coalesce,
        Coalescing::Adaptive(xdp::ADAPTIVE_WAIT)
    );
}

#[test]
fn flags_parse_and_check() {
    let a = Args::try_parse_from([
        "clusterset-dns",
        "--file",
        "f.yaml",
        "--zone",
        "a.local,b.local",
        "--ttl",
        "30",
    ])
    .unwrap();
    let c = a.config().unwrap();
    assert_eq!(c.zone.zones, Zones::parse(&["a.local", "b.local"]).unwrap());
    assert_eq!(c.zone.ttl, 30);
    let a = Args::try_parse_from(["clusterset-dns", "--file", "f", "--zone", "bad..zone"]).unwrap();
    let e = a.config().unwrap_err();
    assert!(matches!(e, ConfigError::Zone(ZoneError::BadZone(_))), "{e}");
    assert!(e.to_string().contains("bad..zone"));
    let a = Args::try_parse_from(["clusterset-dns", "--namespace", "a,b"]).unwrap();
    assert!(matches!(a.config().unwrap().origin, Origin::Kube(k) if k.namespaces == ["a", "b"]));
    assert!(Args::try_parse_from(["clusterset-dns", "--file", "f", "--context", "c"]).is_err());
    assert!(Args::try_parse_from(["clusterset-dns", "--serviceimport-version", "v2"]).is_err());
    assert!(Args::try_parse_from(["clusterset-dns", "--listen", "nowhere"]).is_err());
    // The trust boundary's flags.
    let policy = |args: &[&str]| {
        let mut all = vec!["clusterset-dns"];
        all.extend_from_slice(args);
        Args::try_parse_from(all)
            .map(|a| a.serve.source.policy(&a.serve.zone))
            .unwrap()
    };
    assert_eq!(policy(&[]).unwrap(), Policy::default());
    assert!(
        policy(&["--exclude-namespace="])
            .unwrap()
            .exclude_namespaces
            .is_empty()
    );
    let p = policy(&[
        "--deny-cidr",
        "198.18.0.0/15,fd00::/8",
        "--allow-cidr",
        "10.0.0.0/8",
        "--exclude-namespace",
        "a,b",
    ])
    .unwrap();
    assert_eq!((p.deny.len(), p.allow.len()), (2, 1));
    assert_eq!(p.exclude_namespaces, ["a", "b"]);
    let e = policy(&["--namespace", "kube-system"]).unwrap_err();
    assert!(
        e.to_string()
            .contains("\"kube-system\" is given to --namespace but excluded"),
        "{e}"
    );
    assert!(policy(&["--namespace", "kube-system", "--exclude-namespace="]).is_ok());
    assert!(
        policy(&["--exclude-namespace", "Kube_System"])
            .unwrap_err()
            .to_string()
            .contains("Kube_System")
    );
    assert!(Args::try_parse_from(["clusterset-dns", "--deny-cidr", "10.0.0.0/40"]).is_err());
}

#[test]
fn sources_and_linkerd_flags() {
    let selection = |args: &[&str]| {
        let mut all = vec!["clusterset-dns"];
        all.extend_from_slice(args);
        Args::try_parse_from(all)
            .map_err(|e| e.to_string())
            .and_then(|a| a.serve.source.selection().map_err(|e| e.to_string()))
    };
    assert_eq!(selection(&[]).unwrap(), Selection::default());
    // The own cluster id: one or two labels, lower-cased; anything else stops start-up.
    let own = selection(&["--cluster-id", "Prod.EU"]).unwrap();
    assert_eq!(own.cluster_id.as_deref(), Some("prod.eu"));
    for bad in ["a.b.c", "x-", "", "under_score"] {
        let arg = format!("--cluster-id={bad}");
        let e = selection(&[&arg]).unwrap_err();
        assert!(
            e.contains("--cluster-id") && e.contains("not a cluster id"),
            "{e}"
        );
    }
    let both = selection(&["--source", "mcs,linkerd", "--linkerd-mirrors"]).unwrap();
    assert!(both.mcs && both.linkerd.as_ref().unwrap().mirrors);
    // Repeated, and the ids lower-cased.
    let s = selection(&[
        "--source=linkerd",
        "--linkerd-cluster-id",
        "east=East.Prod,west=w",
        "--linkerd-cluster-id=north=n",
    ])
    .unwrap();
    assert!(!s.mcs);
    let ids = s.linkerd.unwrap().cluster_ids;
    assert_eq!(ids["east"], "east.prod");
    assert_eq!(ids.len(), 3);
    for (args, says) in [
        (&["--source", "istio"][..], "istio"),
        (&["--linkerd-mirrors"][..], "need --source linkerd"),
        (
            &["--source=linkerd", "--linkerd-cluster-id", "east"][..],
            "LINK=ID",
        ),
        (
            &["--source=linkerd", "--linkerd-cluster-id", "=x"][..],
            "names no Link",
        ),
        (
            &["--source=linkerd", "--linkerd-cluster-id", "e=a.b.c"][..],
            "one or two DNS labels",
        ),
        (
            &["--source=linkerd", "--linkerd-cluster-id", "e=a,e=b"][..],
            "twice",
        ),
        (
            &["--source=linkerd", "--serviceimport-version=v1beta1"][..],
            "needs --source mcs",
        ),
    ] {
        let e = selection(args).unwrap_err();
        assert!(e.contains(says), "{args:?}: {e}");
    }
}
