use k8s_openapi::api::core::v1::Service;
use kube::runtime::watcher::Event;

use super::*;
use crate::bridge::runtime::store::Codec;

const LABELLED: u8 = 1;

fn service(name: &str, labelled: bool) -> Service {
    let mut s = Service::default();
    s.metadata.namespace = Some("shop".into());
    s.metadata.name = Some(name.into());
    if labelled {
        s.metadata.labels = Some([("a".to_string(), "b".to_string())].into());
    }
    s
}

fn labelled(s: &Service) -> u8 {
    u8::from(s.metadata.labels.is_some())
}

fn told(name: &str, was: u8, now: u8) -> Heard {
    Heard::Key {
        key: ("shop".into(), name.into()),
        was,
        now,
    }
}

/// What `rx` holds now: its objects told, sorted, and whether a list was told last.
fn drain(rx: &mut mpsc::UnboundedReceiver<Heard>) -> (Vec<Heard>, bool) {
    let mut heard: Vec<Heard> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
    let listed = heard.last() == Some(&Heard::Listed);
    heard.retain(|h| *h != Heard::Listed);
    heard.sort_by_key(|h| format!("{h:?}"));
    (heard, listed)
}

#[test]
fn every_reader_is_told_each_change_and_a_late_one_what_it_missed_first() {
    let feed = Feed::new(Writer::new(labelled, Codec::services()));
    let mut early = feed.subscribe();
    feed.apply(&Event::Init);
    feed.apply(&Event::InitApply(service("web", true)));
    // A reader that comes while the first list is under way is told it when it is done.
    let mut during = feed.subscribe();
    feed.apply(&Event::InitApply(service("api", true)));
    assert_eq!(
        drain(&mut early),
        (vec![], false),
        "half a list tells nothing"
    );
    feed.apply(&Event::InitDone);
    let listed = (
        vec![told("api", 0, LABELLED), told("web", 0, LABELLED)],
        true,
    );
    assert_eq!(drain(&mut early), listed);
    assert_eq!(drain(&mut during), listed);
    // One that comes after is told what the store holds, as added, then that it was listed.
    let mut late = feed.subscribe();
    assert_eq!(drain(&mut late), listed);
    // From then on each reader is told the same, and reads the object from the one store.
    feed.apply(&Event::Apply(service("web", false)));
    for rx in [&mut early, &mut during, &mut late] {
        assert_eq!(drain(rx), (vec![told("web", LABELLED, 0)], false));
    }
    let web = feed.store().get("shop", "web").expect("stored");
    assert!(web.metadata.labels.is_none());
    // A reader that is gone is let go, and the others are still told.
    drop(during);
    feed.apply(&Event::Delete(service("api", true)));
    assert_eq!(feed.state.lock().unwrap().readers.len(), 2);
    assert_eq!(drain(&mut early), (vec![told("api", LABELLED, 0)], false));
}
