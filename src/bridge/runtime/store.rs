//! The bridge's stores of the objects it watches, packed: each object is kept as the compact
//! JSON of what [`super::slim`] leaves of it, and decoded when a reconcile reads it: a decoded
//! object costs several times its text (docs/performance.md, "What the bridge's runtime is
//! shaped by", has the figures).
//!
//! Each kind is kept as far as the bridge reads it ([`Trim`]): a Service's status, selector and
//! target ports, an object's creation time and the parts of its field managers' records the
//! bridge does not read are left out before it is encoded.
//!
//! What is read of every object at once (the keys, and the marks the walks select by: the
//! bridge's own objects, this cluster's exported Services, Linkerd's) is kept beside the text,
//! so that no walk decodes the store. A store is fed as kube-runtime's reflector feeds its own:
//! a relist (`Init` … `InitDone`) is gathered aside and replaces the store when it is done, so
//! a reader never sees half a list; what the relist changed is told key by key ([`Heard`]).
//!
//! Each text is kept compressed (zstd) against a dictionary of its [`Codec`], which the store's
//! maker owns and passes in: the texts of the first objects the kind met, and of later ones if
//! those stop packing well. Objects of one kind repeat each other's keys, label and annotation names, managers
//! and condition messages, which is most of their text (docs/performance.md has how well).

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use kube::runtime::watcher;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::Key;

/// One object: the marks the writer's [`Marker`] gave it, and its JSON, packed
/// ([`Codec::pack`]).
struct Entry {
    marks: u8,
    text: Arc<[u8]>,
}

/// What a store's writer marks each object with, as bits: the walks select by them.
pub(crate) type Marker<K> = fn(&K) -> u8;

/// What one event of a watch changed in its store, for the readers: an object added, changed
/// or removed (its marks before and after: 0 where it was not, or is no more), or a full list
/// done (after each object it changed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Heard {
    Key { key: Key, was: u8, now: u8 },
    Listed,
}

/// The objects of one watch, by namespace and name. Cheap to clone; every clone reads the
/// same objects.
pub(crate) struct Store<K> {
    map: Arc<RwLock<HashMap<Key, Entry>>>,
    codec: Arc<Codec>,
    of: PhantomData<fn() -> K>,
}

impl<K> Clone for Store<K> {
    fn clone(&self) -> Self {
        let (map, codec) = (self.map.clone(), self.codec.clone());
        Store {
            map,
            codec,
            of: PhantomData,
        }
    }
}

impl<K: kube::Resource + DeserializeOwned> Store<K> {
    /// The object `ns/name`, decoded.
    pub(crate) fn get(&self, ns: &str, name: &str) -> Option<Arc<K>> {
        let map = self.map.read().expect("not poisoned");
        let e = map.get(&(ns.into(), name.into()))?;
        Some(Arc::new(self.codec.unpack(&e.text)))
    }

    /// The object `key`, decoded, if it has the mark `bit`.
    pub(crate) fn get_marked(&self, key: &Key, bit: u8) -> Option<Arc<K>> {
        let map = self.map.read().expect("not poisoned");
        let e = map.get(key).filter(|e| e.marks & bit != 0)?;
        Some(Arc::new(self.codec.unpack(&e.text)))
    }

    /// The namespace and name of every object.
    pub(crate) fn keys(&self) -> Vec<Key> {
        self.map
            .read()
            .expect("not poisoned")
            .keys()
            .cloned()
            .collect()
    }

    /// The namespace and name of every object with the mark `bit`.
    pub(crate) fn marked(&self, bit: u8) -> Vec<Key> {
        let map = self.map.read().expect("not poisoned");
        map.iter()
            .filter(|(_, e)| e.marks & bit != 0)
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// How many objects have the mark `bit`.
    pub(crate) fn count_marked(&self, bit: u8) -> usize {
        let map = self.map.read().expect("not poisoned");
        map.values().filter(|e| e.marks & bit != 0).count()
    }

    pub(crate) fn len(&self) -> usize {
        self.map.read().expect("not poisoned").len()
    }

    /// The object a text of [`Store::pack`] holds.
    pub(crate) fn unpack(&self, text: &[u8]) -> Arc<K> {
        Arc::new(self.codec.unpack(text))
    }

    /// Every object as a [`Heard::Key`] that adds it: what a reader that comes late has
    /// missed.
    pub(crate) fn replay(&self) -> Vec<Heard> {
        let map = self.map.read().expect("not poisoned");
        map.iter()
            .map(|(key, e)| Heard::Key {
                key: key.clone(),
                was: 0,
                now: e.marks,
            })
            .collect()
    }
}

impl<K: Serialize> Store<K> {
    /// `o` as this store keeps an object: what its kind's [`Trim`] leaves, packed (`None`
    /// only if it does not encode, which the kinds stored always do).
    pub(crate) fn pack(&self, o: &K) -> Option<Arc<[u8]>> {
        let mut v = serde_json::to_value(o).ok()?;
        (self.codec.trim)(&mut v);
        Some(self.codec.pack(v.to_string()))
    }
}

/// How a store keeps a kind of object: what of it is kept ([`Trim`]), and the dictionaries its
/// texts are packed against. Owned by the stores it is given to (one, or those of one kind
/// whose objects look alike: the linked clusters' exported Services). The first dictionary is
/// made from the texts of the first objects it met; another from the latest ones when the texts packed since stop packing well (a first
/// start, when no export has conditions yet and the bridge is about to write them on every
/// one), up to [`GENERATIONS`]. A packed text's first byte names its dictionary.
pub(crate) struct Codec {
    name: &'static str,
    trim: Trim,
    packing: Mutex<Packing>,
    /// What unpacks the texts of each dictionary made so far.
    unpack: [OnceLock<Mutex<zstd::bulk::Decompressor<'static>>>; GENERATIONS],
}

/// What packs a kind's new texts.
struct Packing {
    /// How many dictionaries were made; the texts are packed with the last.
    made: usize,
    pack: Option<zstd::bulk::Compressor<'static>>,
    /// Texts gathered for the next dictionary, while one is to be made.
    samples: Option<Vec<String>>,
    /// Of the texts packed since the last look: how many, their bytes, and packed.
    texts: usize,
    bytes: usize,
    packed: usize,
}

/// How many objects' texts a dictionary is made of, and the most of one text's bytes it
/// takes (an object with a thousand endpoints is not what the next one looks like).
const SAMPLES: usize = 8;
const SAMPLE_MAX: usize = 4096;
/// How many dictionaries a kind makes at most. Each keeps its unpacking context (zstd's, with
/// its copy of the dictionary) for as long as the process runs: a text packed with it may
/// still be held.
const GENERATIONS: usize = 4;
/// After how many texts the last dictionary is looked at, and the share of their size the
/// texts must pack into for it to be kept (the bench's objects pack into a fifth to a
/// fourteenth with a dictionary of their kind; an export with conditions against a
/// dictionary of exports without, into two fifths).
const LOOK_EVERY: usize = 1024;
const WELL_PACKED: f64 = 1.0 / 3.0;
/// zstd's level.
const LEVEL: i32 = 3;

impl Codec {
    pub(crate) fn new(name: &'static str, trim: Trim) -> Arc<Codec> {
        Arc::new(Codec {
            name,
            trim,
            packing: Mutex::new(Packing {
                made: 0,
                pack: None,
                samples: Some(Vec::new()),
                texts: 0,
                bytes: 0,
                packed: 0,
            }),
            unpack: [const { OnceLock::new() }; GENERATIONS],
        })
    }

    /// `text`, packed: its dictionary's number and the zstd frame of it compressed against
    /// that dictionary; before the first dictionary is made, the text as it is.
    fn pack(&self, text: String) -> Arc<[u8]> {
        let mut guard = self.packing.lock().expect("not poisoned");
        let p = &mut *guard;
        let mut out = None;
        if let Some(pack) = &mut p.pack {
            let generation = (p.made - 1) as u8;
            let mut packed = vec![generation];
            // Compressing into memory fails only where allocating would.
            packed.extend(pack.compress(text.as_bytes()).expect("zstd compresses"));
            p.texts += 1;
            p.bytes += text.len();
            p.packed += packed.len();
            if p.texts == LOOK_EVERY {
                if p.made < GENERATIONS && p.packed as f64 > p.bytes as f64 * WELL_PACKED {
                    p.samples = Some(Vec::new());
                }
                (p.texts, p.bytes, p.packed) = (0, 0, 0);
            }
            out = Some(Arc::from(packed));
        }
        if text.len() <= SAMPLE_MAX
            && let Some(samples) = &mut p.samples
        {
            samples.push(text.clone());
            if samples.len() == SAMPLES {
                let dictionary = p.samples.take().expect("gathered").concat();
                self.make(p, dictionary.as_bytes());
            }
        }
        out.unwrap_or_else(|| Arc::from(text.into_bytes()))
    }

    /// The next dictionary, from `dictionary`: new texts are packed with it.
    fn make(&self, p: &mut Packing, dictionary: &[u8]) {
        // Made from a few KB in memory: fails only where allocating would.
        let mut pack = zstd::bulk::Compressor::with_dictionary(LEVEL, dictionary)
            .expect("a zstd compression context");
        // Every text is one frame that says its size (what unpacking allocates); no checksum
        // (the text never leaves memory) and no dictionary ID (the first byte says which).
        for param in [
            zstd::zstd_safe::CParameter::ContentSizeFlag(true),
            zstd::zstd_safe::CParameter::ChecksumFlag(false),
            zstd::zstd_safe::CParameter::DictIdFlag(false),
        ] {
            pack.set_parameter(param).expect("a zstd parameter");
        }
        let unpack = zstd::bulk::Decompressor::with_dictionary(dictionary)
            .expect("a zstd decompression context");
        let _ = self.unpack[p.made].set(Mutex::new(unpack));
        p.pack = Some(pack);
        p.made += 1;
        (p.texts, p.bytes, p.packed) = (0, 0, 0);
    }

    /// The object a text packed by [`Codec::pack`] holds. The text was encoded from a `K` by
    /// [`Writer::apply`]: every kind the bridge stores reads back what it wrote (the tests of
    /// this module hold each one to it), so a failure is a bug in that pairing, not bad input.
    fn unpack<K: DeserializeOwned>(&self, packed: &[u8]) -> K {
        let decoded = match packed.split_first() {
            Some((&generation, frame)) if (generation as usize) < GENERATIONS => {
                let unpack = self.unpack[generation as usize]
                    .get()
                    .expect("a packed text's dictionary was made");
                let size = zstd::zstd_safe::get_frame_content_size(frame)
                    .ok()
                    .flatten()
                    .expect("a packed text says its size") as usize;
                let text = unpack
                    .lock()
                    .expect("not poisoned")
                    .decompress(frame, size)
                    .expect("a packed text unpacks with its dictionary");
                serde_json::from_slice(&text)
            }
            _ => serde_json::from_slice(packed),
        };
        decoded.unwrap_or_else(|e| {
            panic!(
                "a stored {} decodes as the type it was encoded from: {e}",
                self.name
            )
        })
    }
}

/// Feeds a [`Store`] from a watch's events.
pub(crate) struct Writer<K> {
    store: Store<K>,
    /// What [`Store::marked`] selects by, judged once as each object arrives.
    marks: Marker<K>,
    /// A relist under way: the objects listed so far.
    listing: Option<HashMap<Key, Entry>>,
    /// Whether a list was done: what a reader that comes late is told it missed.
    pub(crate) listed: bool,
    /// The most objects kept: one more is left out (a watch that floods the store cannot grow
    /// it without bound).
    limit: usize,
    /// How many objects the last list left out (each object once: a list names each once).
    pub(crate) left_out: usize,
    /// Whether that count may be wrong since: an object came beyond the limit, or one went while
    /// others were left out (room for them now). A watch event does not say whether the object
    /// beyond was left out before, and keeping the keys left out would grow without bound as
    /// the store does not: only a new list says which are left out now.
    pub(crate) stale: bool,
    /// What the list under way has left out so far: the count once it is done.
    leaving: usize,
}

impl<K: kube::Resource + Serialize + Clone> Writer<K> {
    pub(crate) fn new(marks: Marker<K>, codec: Arc<Codec>) -> Self {
        Writer {
            store: Store {
                map: Default::default(),
                codec,
                of: PhantomData,
            },
            marks,
            listing: None,
            listed: false,
            limit: usize::MAX,
            left_out: 0,
            stale: false,
            leaving: 0,
        }
    }

    /// This writer, keeping at most `limit` objects.
    pub(crate) fn limited(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }

    pub(crate) fn reader(&self) -> Store<K> {
        self.store.clone()
    }

    /// Brings the store up to date with one event of its watch; what it changed.
    pub(crate) fn apply(&mut self, ev: &watcher::Event<K>) -> Vec<Heard> {
        let told = |key: Key, was: Option<Entry>, now: Option<&Entry>| Heard::Key {
            key,
            was: was.map_or(0, |e| e.marks),
            now: now.map_or(0, |e| e.marks),
        };
        let mut map = match ev {
            watcher::Event::Init => {
                self.listing = Some(HashMap::new());
                self.leaving = 0;
                return Vec::new();
            }
            watcher::Event::InitApply(o) => {
                let full = self.listing.as_ref().is_some_and(|l| l.len() >= self.limit);
                if full {
                    self.leaving += 1;
                } else if let Some((key, entry)) = self.entry(o) {
                    self.listing.get_or_insert_default().insert(key, entry);
                }
                return Vec::new();
            }
            _ => self.store.map.write().expect("not poisoned"),
        };
        match ev {
            watcher::Event::Apply(o) => {
                let Some((key, entry)) = self.entry(o) else {
                    return Vec::new();
                };
                if map.len() >= self.limit && !map.contains_key(&key) {
                    self.stale = true;
                    return Vec::new();
                }
                let now = entry.marks;
                let was = map.insert(key.clone(), entry).map_or(0, |e| e.marks);
                vec![Heard::Key { key, was, now }]
            }
            watcher::Event::Delete(o) => {
                let key = super::key(o.meta());
                let Some(was) = map.remove(&key) else {
                    return Vec::new();
                };
                self.stale |= self.left_out > 0;
                vec![told(key, Some(was), None)]
            }
            _ => {
                // A relist done: it replaces the store, and each object it added, changed or
                // took away is told (one whose text is the same is not).
                let mut old = std::mem::replace(&mut *map, self.listing.take().unwrap_or_default());
                let mut out: Vec<Heard> = map
                    .iter()
                    .filter_map(|(key, e)| match old.remove(key) {
                        Some(was) if was.text == e.text && was.marks == e.marks => None,
                        was => Some(told(key.clone(), was, Some(e))),
                    })
                    .collect();
                out.extend(old.into_iter().map(|(key, was)| told(key, Some(was), None)));
                out.push(Heard::Listed);
                self.listed = true;
                (self.left_out, self.stale) = (self.leaving, false);
                out
            }
        }
    }

    fn entry(&self, o: &K) -> Option<(Key, Entry)> {
        let m = o.meta();
        let key = (
            m.namespace.as_deref().unwrap_or_default().into(),
            m.name.as_deref()?.into(),
        );
        let marks = (self.marks)(o);
        let text = self.store.pack(o)?;
        Some((key, Entry { marks, text }))
    }
}

/// No mark, for stores no walk selects from.
pub(crate) fn unmarked<K>(_: &K) -> u8 {
    0
}

/// What of an object's JSON a store keeps: a kind's trim, applied before it is encoded.
pub(crate) type Trim = fn(&mut Value);

/// The metadata every store keeps: what names the object and its version (an Event's
/// reference, a write's precondition), its labels and annotations, and what a whole-object
/// write must carry over (owners, finalizers); of the field managers' records, who wrote what
/// (`owned_labels`, `owned_keys`), not when or how.
const METADATA: [&str; 9] = [
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "labels",
    "annotations",
    "managedFields",
    "ownerReferences",
    "finalizers",
];

fn metadata(v: &mut Value, also: &[&str]) {
    let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    m.retain(|k, _| METADATA.contains(&k.as_str()) || also.contains(&k.as_str()));
    for f in objects(m.get_mut("managedFields")) {
        f.retain(|k, _| matches!(k.as_str(), "manager" | "subresource" | "fieldsV1"));
    }
}

/// The objects in the list `v`, if it is one.
fn objects(v: Option<&mut Value>) -> impl Iterator<Item = &mut serde_json::Map<String, Value>> {
    (v.and_then(Value::as_array_mut).into_iter().flatten()).filter_map(Value::as_object_mut)
}

/// A kind of k8s-openapi's needs no `apiVersion` and `kind` to decode: its type says them.
fn typed(v: &mut Value) {
    if let Some(o) = v.as_object_mut() {
        o.remove("apiVersion");
        o.remove("kind");
    }
}

impl Codec {
    /// Services: what the export half judges and carries, and the import half reads of
    /// Linkerd's (type, ClusterIPs, ports, session affinity, traffic policies, IP families), and
    /// the external IPs the import half gives its own.
    pub(crate) fn services() -> Arc<Codec> {
        Codec::new("Service", service)
    }

    /// EndpointSlices: all but their creation time.
    pub(crate) fn slices() -> Arc<Codec> {
        Codec::new("EndpointSlice", slice)
    }

    /// A cluster's own EndpointSlices, as far as another slice copies them: their address
    /// type, ports, each endpoint's addresses, conditions and hostname, and the label naming
    /// their Service (`kubernetes.io/service-name`).
    pub(crate) fn pods() -> Arc<Codec> {
        Codec::new("EndpointSlice", pods)
    }

    /// ServiceExports: their creation time (the oldest export wins a conflict) and generation
    /// (the conditions' `observedGeneration`) too.
    pub(crate) fn exports() -> Arc<Codec> {
        Codec::new("ServiceExport", export)
    }

    /// ServiceImports: all but their creation time and generation; they keep their
    /// `apiVersion` and `kind`, which a `DynamicObject` says what it is by.
    pub(crate) fn imports() -> Arc<Codec> {
        Codec::new("ServiceImport", custom)
    }

    /// Linkerd's Links, kept as ServiceImports are.
    pub(crate) fn links() -> Arc<Codec> {
        Codec::new("Link", custom)
    }
}

fn service(v: &mut Value) {
    const SPEC: [&str; 10] = [
        "type",
        "clusterIP",
        "clusterIPs",
        "externalIPs",
        "ports",
        "sessionAffinity",
        "sessionAffinityConfig",
        "internalTrafficPolicy",
        "trafficDistribution",
        "ipFamilies",
    ];
    typed(v);
    metadata(v, &[]);
    if let Some(o) = v.as_object_mut() {
        o.remove("status");
    }
    if let Some(spec) = v.get_mut("spec").and_then(Value::as_object_mut) {
        spec.retain(|k, _| SPEC.contains(&k.as_str()));
        for p in objects(spec.get_mut("ports")) {
            p.retain(|k, _| matches!(k.as_str(), "name" | "protocol" | "port" | "appProtocol"));
        }
    }
}

fn slice(v: &mut Value) {
    typed(v);
    metadata(v, &[]);
}

fn pods(v: &mut Value) {
    typed(v);
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        m.retain(|k, _| matches!(k.as_str(), "name" | "namespace" | "labels"));
        if let Some(l) = m.get_mut("labels").and_then(Value::as_object_mut) {
            l.retain(|k, _| k == crate::source::mcs::LABEL_KUBERNETES_SERVICE_NAME);
        }
    }
    for e in objects(v.get_mut("endpoints")) {
        e.retain(|k, _| matches!(k.as_str(), "addresses" | "conditions" | "hostname"));
    }
}

fn export(v: &mut Value) {
    metadata(v, &["creationTimestamp", "generation"]);
}

fn custom(v: &mut Value) {
    metadata(v, &[]);
}

#[cfg(test)]
mod tests;
