use ahead::paper::FIGURES;
use ahead::SimConfig;
fn main() {
    for pol in ["linux-2.6.0", "linux-2.6.7"] {
        for f in FIGURES.iter() {
            let r = f.run(pol, SimConfig::default()).unwrap();
            let p = f.published(pol).unwrap();
            println!("{pol} fig{} read {} (paper {}) wasted {} ({}) req {} ({})  faithful read {} req {}",
                f.figure, r.paper.pages_read, p.pages_read, r.paper.wasted_pages, p.wasted_pages, r.paper.requests, p.requests,
                r.faithful.pages_read, r.faithful.requests);
        }
    }
}
