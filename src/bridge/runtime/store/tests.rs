use super::service as service_trim;
use super::*;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::DynamicObject;
use serde_json::json;

/// A zstd frame's first bytes: a packed text's, after its dictionary's number.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

fn service(ns: &str, name: &str, rv: &str) -> Service {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": ns, "resourceVersion": rv, "uid": "u-1",
            "creationTimestamp": "2026-12-05T10:00:00Z",
            "labels": {"mirror.linkerd.io/exported": "remote-discovery"},
            "annotations": {"linkerd-bridge.clusterset-dns.io/export": "{\"version\":1}"},
            "managedFields": [{"manager": "linkerd-bridge.clusterset-dns.io", "operation": "Apply",
                "apiVersion": "v1", "time": "2026-12-05T10:00:01Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:labels": {"f:mirror.linkerd.io/exported": {}}}}}]},
        "spec": {"type": "ClusterIP", "clusterIP": "198.19.0.1", "clusterIPs": ["198.19.0.1"],
            "externalIPs": ["198.19.0.2"], "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack", "sessionAffinity": "ClientIP",
            "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 30}},
            "internalTrafficPolicy": "Local", "trafficDistribution": "PreferClose",
            "ports": [{"name": "http", "port": 80, "protocol": "TCP", "appProtocol": "http", "targetPort": "web"}]}
    }))
    .expect("a Service")
}

/// What a store keeps of `svc` ([`service_trim`]): all but its creation time, the managers'
/// bookkeeping, the IP family policy and the ports' target ports.
fn kept(mut svc: Service) -> Service {
    svc.metadata.creation_timestamp = None;
    for f in svc.metadata.managed_fields.iter_mut().flatten() {
        (f.api_version, f.fields_type, f.operation, f.time) = (None, None, None, None);
    }
    let spec = svc.spec.as_mut().unwrap();
    spec.ip_family_policy = None;
    spec.ports
        .iter_mut()
        .flatten()
        .for_each(|p| p.target_port = None);
    svc
}

/// The mark of a Service with labels.
const LABELLED: u8 = 1;

fn labelled(s: &Service) -> u8 {
    u8::from(s.metadata.labels.as_ref().is_some_and(|l| !l.is_empty()))
}

#[test]
fn each_kind_reads_back_what_was_stored() {
    let svc = service("a", "web", "1");
    let mut w = Writer::new(unmarked::<Service>, Codec::services());
    w.apply(&watcher::Event::Apply(svc.clone()));
    let back = w.reader().get("a", "web").expect("stored");
    // What the halves read is all there; what they do not read is not.
    assert_eq!(*back, kept(svc.clone()));
    assert!(
        back.metadata.managed_fields.as_ref().unwrap()[0]
            .fields_v1
            .is_some()
    );

    let slice: EndpointSlice = serde_json::from_value(json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "web-east", "namespace": "a", "resourceVersion": "7",
            "labels": {"multicluster.kubernetes.io/service-name": "web"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["198.19.0.9"], "hostname": "web-0", "conditions": {"ready": true}}],
        "ports": [{"name": "http", "port": 80, "protocol": "TCP", "appProtocol": "http"}]
    }))
    .expect("a slice");
    let mut w = Writer::new(unmarked::<EndpointSlice>, Codec::slices());
    w.apply(&watcher::Event::Apply(slice.clone()));
    assert_eq!(*w.reader().get("a", "web-east").expect("stored"), slice);

    // A cluster's own slice of an exported Service: what an MCS slice copies of it, and the
    // label naming its Service.
    let own: EndpointSlice = serde_json::from_value(json!({
        "metadata": {"name": "web-x7", "namespace": "a", "resourceVersion": "8", "uid": "u",
            "labels": {"kubernetes.io/service-name": "web", "mirror.linkerd.io/federated": "member"},
            "annotations": {"endpoints.kubernetes.io/last-change-trigger-time": "2026-12-07T00:00:00Z"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["198.19.0.9"], "hostname": "web-0", "nodeName": "n1", "zone": "z",
            "targetRef": {"kind": "Pod", "name": "web-0", "namespace": "a"},
            "conditions": {"ready": false, "serving": true, "terminating": true}}],
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP", "appProtocol": "http"}]
    }))
    .expect("a slice");
    let mut w = Writer::new(unmarked::<EndpointSlice>, Codec::pods());
    w.apply(&watcher::Event::Apply(own));
    let back = serde_json::to_value(&*w.reader().get("a", "web-x7").expect("stored")).unwrap();
    assert_eq!(
        back,
        json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "web-x7", "namespace": "a", "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["198.19.0.9"], "hostname": "web-0",
                "conditions": {"ready": false, "serving": true, "terminating": true}}],
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP", "appProtocol": "http"}]
        })
    );

    let import: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceImport",
        "metadata": {"name": "web", "namespace": "a", "resourceVersion": "9", "generation": 2},
        "spec": {"type": "ClusterSetIP", "ips": ["198.19.0.1"], "ports": [{"port": 80, "protocol": "TCP"}]},
        "status": {"clusters": [{"cluster": "east"}]}
    }))
    .expect("an import");
    let mut w = Writer::new(unmarked::<DynamicObject>, Codec::imports());
    w.apply(&watcher::Event::Apply(import.clone()));
    let back = w.reader().get("a", "web").expect("stored");
    let mut want = serde_json::to_value(&import).unwrap();
    want["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("generation");
    // Replaced whole from what was read: it says what it is.
    assert_eq!(serde_json::to_value(&*back).unwrap(), want);
    assert_eq!(back.types.as_ref().unwrap().kind, "ServiceImport");

    let mut w = Writer::new(unmarked::<DynamicObject>, Codec::exports());
    w.apply(&watcher::Event::Apply(import.clone()));
    let back = w.reader().get("a", "web").expect("stored");
    assert_eq!(
        back.metadata.generation,
        Some(2),
        "observedGeneration is read"
    );
}

#[test]
fn a_relist_replaces_the_store_when_it_is_done_and_not_before() {
    let mut w = Writer::new(labelled, Codec::services());
    let store = w.reader();
    let key = |name: &str| -> Key { ("a".into(), name.into()) };
    w.apply(&watcher::Event::Apply(service("a", "old", "1")));
    w.apply(&watcher::Event::Apply(service("a", "same", "1")));
    assert!(w.apply(&watcher::Event::Init).is_empty());
    let heard = w.apply(&watcher::Event::InitApply(service("a", "new", "2")));
    assert!(heard.is_empty(), "nothing is told of half a list");
    w.apply(&watcher::Event::InitApply(service("a", "same", "1")));
    // Half a list is not shown: the store is as it was.
    let mut keys = store.keys();
    keys.sort();
    assert_eq!(keys, vec![key("old"), key("same")]);
    let mut heard = w.apply(&watcher::Event::InitDone);
    let mut keys = store.keys();
    keys.sort();
    assert_eq!(keys, vec![key("new"), key("same")]);
    assert!(store.get("a", "old").is_none());
    // Told: what the list added and took away (not what it holds as it was), then the list.
    assert_eq!(heard.pop(), Some(Heard::Listed));
    heard.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
    let told = |name: &str, was, now| Heard::Key {
        key: key(name),
        was,
        now,
    };
    assert_eq!(
        heard,
        vec![told("new", 0, LABELLED), told("old", LABELLED, 0)]
    );
    let mut marked = store.marked(LABELLED);
    marked.sort();
    assert_eq!(marked, vec![key("new"), key("same")]);
    assert_eq!(store.count_marked(LABELLED), 2);
    assert_eq!(store.count_marked(2), 0, "another mark holds for none");
}

#[test]
fn apply_replaces_and_delete_removes() {
    let mut w = Writer::new(labelled, Codec::services());
    let store = w.reader();
    let key: Key = ("a".into(), "web".into());
    let told = |was, now| {
        vec![Heard::Key {
            key: key.clone(),
            was,
            now,
        }]
    };
    let heard = w.apply(&watcher::Event::Apply(service("a", "web", "1")));
    assert_eq!(heard, told(0, LABELLED));
    let mut plain = service("a", "web", "2");
    plain.metadata.labels = None;
    // Told with its marks before and after.
    assert_eq!(w.apply(&watcher::Event::Apply(plain)), told(LABELLED, 0));
    let got = store.get("a", "web").expect("stored");
    assert_eq!(got.metadata.resource_version.as_deref(), Some("2"));
    assert_eq!(store.count_marked(LABELLED), 0, "the mark is judged again");
    assert!(store.get_marked(&key, LABELLED).is_none());
    assert_eq!(
        w.apply(&watcher::Event::Delete(service("a", "web", "3"))),
        told(0, 0)
    );
    assert!(store.get("a", "web").is_none());
    assert_eq!(store.len(), 0);
    let again = w.apply(&watcher::Event::Delete(service("a", "web", "3")));
    assert!(
        again.is_empty(),
        "a delete of what is not there tells nothing"
    );
}

#[test]
fn texts_are_packed_against_the_first_objects_of_their_kind() {
    let mut w = Writer::new(unmarked::<Service>, Codec::services());
    let store = w.reader();
    let name = |i: usize| format!("web-{i}");
    for i in 0..SAMPLES + 4 {
        w.apply(&watcher::Event::Apply(service(
            "shop",
            &name(i),
            &i.to_string(),
        )));
    }
    let map = store.map.read().unwrap();
    let packed = |i: usize| map[&("shop".into(), name(i).into())].text.clone();
    // The first ones made the dictionary and are kept as they came; the later ones are
    // packed, against it, into a fraction of their text.
    assert!(packed(0).starts_with(b"{"));
    assert!(packed(SAMPLES - 1).starts_with(b"{"));
    for i in SAMPLES..SAMPLES + 4 {
        assert_eq!(packed(i)[0], 0, "{i} packed with the first dictionary");
        assert!(packed(i)[1..].starts_with(&ZSTD_MAGIC), "{i} packed");
        assert!(
            packed(i).len() * 4 < packed(0).len(),
            "{} bytes packed, of {}",
            packed(i).len(),
            packed(0).len()
        );
    }
    drop(map);
    // Every one reads back whole, packed or not.
    for i in 0..SAMPLES + 4 {
        let got = store.get("shop", &name(i)).expect("stored");
        assert_eq!(got.metadata.name.as_deref(), Some(name(i).as_str()));
        assert_eq!(got.metadata.resource_version, Some(i.to_string()));
        assert_eq!(
            got.spec.as_ref().unwrap().cluster_ip.as_deref(),
            Some("198.19.0.1")
        );
    }
    // A text too long to be a sample is neither gathered nor refused.
    let codec = Codec::services();
    let mut w = Writer::new(unmarked::<Service>, codec.clone());
    let mut big = service("shop", "big", "1");
    big.metadata.annotations = Some([("a".to_string(), "x".repeat(SAMPLE_MAX))].into());
    w.apply(&watcher::Event::Apply(big.clone()));
    assert!(
        codec
            .packing
            .lock()
            .unwrap()
            .samples
            .as_ref()
            .unwrap()
            .is_empty()
    );
    assert_eq!(*w.reader().get("shop", "big").unwrap(), kept(big));
}

#[test]
fn a_kind_makes_a_new_dictionary_when_its_texts_stop_packing_well() {
    let codec = Codec::new("Service", service_trim);
    let mut w = Writer::new(unmarked::<Service>, codec.clone());
    let store = w.reader();
    // The first objects have no annotation; then every one carries the same long one
    // (as every export comes to carry the same condition messages), of text that does
    // not compress by itself: against the first dictionary it packs badly, so after a
    // look the latest texts make another.
    let mut x: u32 = 1;
    let said: String = (0..400)
        .map(|_| {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            let digits = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
            char::from(digits[(x >> 16) as usize % 64])
        })
        .collect();
    let object = |i: usize| {
        let mut s = service("shop", &format!("web-{i}"), &i.to_string());
        if i >= SAMPLES {
            s.metadata.annotations = Some([("said".to_string(), said.clone())].into());
        }
        s
    };
    let n = SAMPLES + LOOK_EVERY + SAMPLES + 10;
    for i in 0..n {
        w.apply(&watcher::Event::Apply(object(i)));
    }
    assert_eq!(codec.packing.lock().unwrap().made, 2);
    let map = store.map.read().unwrap();
    let packed = |i: usize| {
        map[&("shop".into(), format!("web-{i}").into())]
            .text
            .clone()
    };
    let (early, late) = (packed(SAMPLES + 1), packed(n - 1));
    assert_eq!((early[0], late[0]), (0, 1), "each names its dictionary");
    assert!(
        late.len() * 2 < early.len(),
        "{} bytes with the new dictionary, {} with the first",
        late.len(),
        early.len()
    );
    drop(map);
    for i in [0, SAMPLES, SAMPLES + 1, n - SAMPLES - 11, n - 1] {
        let got = store.get("shop", &format!("web-{i}")).expect("stored");
        let want = object(i);
        assert_eq!(got.metadata.annotations, want.metadata.annotations, "{i}");
        assert_eq!(
            got.metadata.resource_version,
            want.metadata.resource_version
        );
    }
}

/// A limited store keeps what it has and leaves out what comes beyond its limit, in a list and
/// after; what goes makes room again. A list counts what it left out, each object once; what
/// comes beyond the limit after it, or room made while some were left out, says that only a
/// new list can tell what is left out now.
#[test]
fn a_limited_store_leaves_out_what_is_beyond_its_limit() {
    let mut w = Writer::new(unmarked::<Service>, Codec::services()).limited(2);
    let store = w.reader();
    w.apply(&watcher::Event::Init);
    for name in ["a", "b", "c"] {
        w.apply(&watcher::Event::InitApply(service("x", name, "1")));
    }
    w.apply(&watcher::Event::InitDone);
    assert_eq!((store.len(), w.left_out, w.stale), (2, 1, false));
    assert!(store.get("x", "c").is_none());
    // A change of one kept is taken; a new one is not.
    assert!(
        !w.apply(&watcher::Event::Apply(service("x", "a", "2")))
            .is_empty()
    );
    assert!(
        w.apply(&watcher::Event::Apply(service("x", "d", "1")))
            .is_empty()
    );
    assert_eq!((store.len(), w.left_out, w.stale), (2, 1, true));
    w.apply(&watcher::Event::Init);
    for name in ["a", "b", "c"] {
        w.apply(&watcher::Event::InitApply(service("x", name, "1")));
    }
    w.apply(&watcher::Event::InitDone);
    assert_eq!((store.len(), w.left_out, w.stale), (2, 1, false));
    w.apply(&watcher::Event::Delete(service("x", "b", "3")));
    assert!(w.stale, "room for what was left out");
    assert!(
        !w.apply(&watcher::Event::Apply(service("x", "d", "2")))
            .is_empty()
    );
    assert!(store.get("x", "d").is_some());
    // A new list counts afresh.
    w.apply(&watcher::Event::Init);
    w.apply(&watcher::Event::InitApply(service("x", "a", "4")));
    w.apply(&watcher::Event::InitDone);
    assert_eq!((store.len(), w.left_out, w.stale), (1, 0, false));
}
