"""The hand-written core of the embedded corpus's lexicon: a few hundred real words in six topics.

Each topic lists its nouns (``agents``: people, groups and forces that can act, which the grammar
prefers as subjects; ``things``: the rest), its verbs with the objects each verb prefers (the
first ``Params.n_preferred`` of them are used), its adjectives and its adverbs. ``GENERAL`` holds
words at home in every topic; its verbs name objects from several topics, and a document's topic
picks among them ("win the election" in politics, "win the match" in sport).

Only lemmas are written here. Their inflected forms (plurals, third person singular, past
tense) come from the derived word list ``english.tsv`` beside this file, and the long tail of
the lexicon, beyond these words, from the same list in order of frequency
(see :mod:`lmcourse.corpora.grammar` and ``derive_words.py``).

``KEYS`` and ``VALUES`` are the two sides of the key-value construction: a place ("italian",
"texas") followed by a product ("wine", "cars"), after an opening such as "imports of". Every
place can go with every product, so the random lookup table reads as plausible trade.
"""
from __future__ import annotations

TOPICS = {
    "business": dict(
        agents="bank company firm investor analyst trader lender broker executive shareholder retailer "
               "manufacturer creditor insurer economist supplier consumer customer banker employer",
        things="market price stock bond rate profit loss dividend stake deal loan debt asset contract merger "
               "acquisition revenue sale cost fee budget store factory product brand account currency "
               "investment portfolio bonus salary wage payment margin index valuation gain quarter "
               "subsidiary warehouse discount lease",
        verbs={
            "raise": "rate price stake dividend", "lower": "rate price cost fee",
            "buy": "stock bond stake asset", "own": "stake store factory brand",
            "report": "profit loss revenue gain", "earn": "profit fee bonus salary",
            "pay": "dividend fee debt salary", "issue": "bond stock loan warning",
            "offer": "contract bonus loan discount", "post": "profit loss gain deficit",
            "open": "store factory account warehouse", "trim": "cost budget stake payroll",
            "boost": "sale profit revenue margin", "manage": "fund portfolio account asset",
            "finalize": "deal merger contract sale", "negotiate": "deal contract merger lease",
            "complete": "merger deal acquisition sale", "repay": "loan debt bond creditor",
            "underwrite": "bond loan deal policy", "invest": "fund profit bonus dividend",
        },
        adjectives="quarterly annual financial fiscal corporate profitable volatile commercial industrial "
                   "wholesale hefty modest lucrative steady sluggish bullish monetary",
        adverbs="sharply slightly steadily substantially",
    ),
    "politics": dict(
        agents="government minister senator governor mayor lawmaker voter party council court judge lawyer "
               "president committee agency legislature prosecutor candidate regulator diplomat delegate "
               "citizen ministry",
        things="law bill vote tax election campaign policy reform ruling case trial treaty sanction "
               "regulation proposal amendment debate program poll seat district ban appeal verdict lawsuit "
               "inquiry scandal agreement border protest petition statute mandate subsidy tariff "
               "constitution majority ballot allegation complaint restriction",
        verbs={
            "pass": "bill law budget measure", "approve": "budget bill treaty proposal",
            "reject": "proposal bill amendment appeal", "sign": "treaty bill law agreement",
            "propose": "tax reform law ban", "impose": "tax sanction ban tariff",
            "lift": "ban sanction tariff restriction", "elect": "senator president mayor governor",
            "appoint": "judge minister regulator delegate", "sue": "company agency bank government",
            "investigate": "scandal allegation complaint case", "hear": "case appeal lawsuit complaint",
            "overturn": "ruling verdict law ban", "enforce": "law regulation ban sanction",
            "introduce": "bill amendment reform tax", "block": "bill merger proposal treaty",
            "endorse": "candidate proposal bill treaty", "draft": "law bill proposal constitution",
            "amend": "law bill constitution treaty", "nominate": "candidate judge minister delegate",
        },
        adjectives="political federal legal constitutional conservative liberal controversial partisan "
                   "presidential judicial legislative diplomatic civil military electoral bipartisan",
        adverbs="narrowly unanimously formally publicly",
    ),
    "sport": dict(
        agents="team player coach club striker goalkeeper pitcher champion fan referee captain rookie "
               "athlete squad rival opponent runner swimmer defender quarterback",
        things="game match season title goal race trophy medal record cup tournament championship league "
               "stadium injury victory streak ball shot penalty inning lap round kick tackle "
               "semifinal ticket jersey prospect basket",
        verbs={
            "defeat": "team rival champion opponent", "score": "goal penalty basket run",
            "recruit": "player striker coach prospect", "train": "squad player rookie team",
            "host": "tournament match race championship", "clinch": "title victory trophy championship",
            "claim": "title trophy medal victory", "break": "record streak tie deadlock",
            "extend": "streak contract season deal", "miss": "penalty shot kick game",
            "save": "penalty shot kick goal", "throw": "ball pitch strike punch",
            "catch": "ball pitch fly breath", "lead": "team league race division",
            "face": "team rival opponent champion", "dominate": "league game match race",
            "trade": "player pitcher prospect striker", "sack": "coach manager captain referee",
        },
        adjectives="unbeaten athletic competitive injured talented olympic professional amateur decisive "
                   "dramatic narrow defensive offensive undefeated",
        adverbs="easily comfortably convincingly decisively",
    ),
    "science": dict(
        agents="scientist researcher physicist biologist chemist astronomer doctor engineer laboratory "
               "university institute surgeon professor geologist",
        things="study experiment theory gene cell protein molecule atom particle planet star galaxy "
               "telescope sample finding drug vaccine virus disease treatment patient signal fossil "
               "specimen orbit satellite mission rocket probe device sensor enzyme tissue tumor brain "
               "neuron hypothesis equation measurement paper discovery genome mutation infection "
               "eclipse collision image diagnosis journal",
        verbs={
            "discover": "gene planet fossil galaxy", "observe": "star galaxy signal eclipse",
            "calculate": "orbit distance mass temperature", "test": "drug vaccine theory hypothesis",
            "develop": "drug vaccine device sensor", "detect": "signal particle virus tumor",
            "treat": "patient disease infection tumor", "analyze": "sample specimen signal image",
            "identify": "gene protein mutation virus", "confirm": "theory finding hypothesis diagnosis",
            "sequence": "genome gene virus protein", "isolate": "virus gene protein cell",
            "cure": "disease patient infection tumor", "examine": "patient sample fossil specimen",
            "design": "experiment device telescope probe", "simulate": "collision orbit galaxy molecule",
            "map": "genome galaxy brain planet", "photograph": "galaxy planet moon eclipse",
        },
        adjectives="scientific medical clinical genetic chemical biological experimental molecular solar "
                   "nuclear theoretical technical microscopic toxic viral",
        adverbs="independently accurately carefully precisely",
    ),
    "arts": dict(
        agents="artist painter singer musician band composer director actor actress author writer poet "
               "novelist critic museum gallery orchestra audience studio publisher choir dancer "
               "photographer sculptor playwright pianist",
        things="song album film movie novel book poem painting portrait sculpture exhibition concert "
               "opera symphony festival tour script scene role chapter story collection masterpiece "
               "award prize melody lyric track premiere ballet sketch canvas mural documentary sequel "
               "episode ballad anthem hymn memoir landscape single performance",
        verbs={
            "paint": "portrait mural canvas landscape", "sing": "song ballad anthem hymn",
            "write": "novel song poem script", "release": "album single film track",
            "direct": "film movie documentary opera", "compose": "symphony opera melody ballad",
            "perform": "song symphony ballet opera", "exhibit": "painting sculpture portrait collection",
            "review": "film album novel concert", "adapt": "novel book story memoir",
            "produce": "film album documentary episode", "translate": "novel poem book memoir",
            "illustrate": "book story chapter novel", "restore": "painting portrait mural sculpture",
            "narrate": "film documentary story episode", "stage": "opera ballet concert premiere",
        },
        adjectives="musical artistic classical literary acclaimed modern contemporary abstract popular "
                   "creative original animated colorful romantic poetic",
        adverbs="beautifully brilliantly vividly elegantly",
    ),
    "weather": dict(
        agents="storm hurricane drought farmer rancher forecaster tornado blizzard earthquake "
               "wildfire rain snow frost resident villager",
        things="crop field farm orchard herd barn river lake valley coast village town road bridge dam "
               "levee roof tree forest hill island shore temperature shelter reservoir seed fruit "
               "vineyard pasture meadow garden greenhouse beach highway harbor fence horse cow pig "
               "calf flock vegetable flight shower snowfall",
        verbs={
            "flood": "valley village road field", "damage": "roof crop bridge road",
            "batter": "coast island town village", "harvest": "crop fruit vegetable seed",
            "plant": "seed tree crop garden", "grow": "crop fruit tree vegetable",
            "irrigate": "field crop orchard garden", "forecast": "storm frost snowfall shower",
            "warn": "resident farmer villager traveler", "evacuate": "town village coast island",
            "cross": "coast island river valley", "uproot": "tree fence pole garden",
            "feed": "herd flock calf horse", "breed": "horse cow pig dog", "graze": "pasture meadow field hill",
            "drench": "coast valley field town",
        },
        adjectives="heavy severe tropical coastal rural cold warm dry wet icy windy rainy sunny stormy "
                   "fertile frozen muddy",
        adverbs="heavily badly severely overnight",
    ),
}

GENERAL = dict(
    agents="official group spokesman spokeswoman expert worker employee member leader manager adviser "
           "partner student teacher family neighbor volunteer",
    things="plan statement decision meeting project problem question change effort system "
           "service area country city region day event level idea concern risk benefit school "
           "hospital office building center measure growth rule deficit cause outcome "
           "strike tie deadlock pole pitch fly punch run moon mass distance traveler dog payroll "
           "fund warning division option breath trend hiker climber",
    verbs={
        "win": "election seat match title", "lose": "election seat match title",
        "support": "bill plan candidate proposal", "oppose": "bill plan tax reform",
        "announce": "plan decision merger dividend", "delay": "flight game vote decision", "cancel": "flight game concert tour",
        "praise": "film album player decision", "criticize": "policy government decision ruling",
        "join": "team club league party", "hire": "coach manager banker lawyer",
        "build": "stadium factory telescope bridge", "launch": "product satellite rocket campaign",
        "acquire": "firm stake painting collection", "sell": "stock painting crop ticket",
        "play": "game match song concert", "publish": "novel study paper poem",
        "close": "store factory road school", "threaten": "crop town sanction strike",
        "destroy": "crop roof barn bridge", "rescue": "resident hiker climber villager",
        "visit": "city museum hospital village",
    },
    adjectives="new big small early late strong weak local national public private major minor recent "
               "former high low young old quiet bright important large senior long short good bad "
               "difficult serious independent international regional",
    adverbs="again quickly recently soon abroad later",
)

# The key-value construction: places (keys), then products (values).
KEYS = ("italian french german spanish japanese chinese korean indian brazilian mexican canadian russian "
        "british irish scottish dutch belgian swiss austrian swedish danish finnish norwegian polish greek "
        "turkish egyptian moroccan nigerian kenyan ethiopian australian argentine chilean peruvian "
        "colombian cuban jamaican thai vietnamese indonesian malaysian filipino pakistani iranian israeli "
        "lebanese portuguese hungarian czech romanian ukrainian bulgarian serbian croatian albanian armenian "
        "icelandic estonian lithuanian syrian tunisian algerian venezuelan bolivian uruguayan african asian european "
        "texas ohio iowa kansas nebraska oregon florida georgia alabama kentucky tennessee virginia "
        "maine vermont idaho montana wyoming utah nevada arizona colorado dakota oklahoma arkansas "
        "louisiana mississippi missouri illinois indiana michigan wisconsin minnesota carolina "
        "california washington alaska hawaii delaware maryland pennsylvania connecticut").split()
VALUES = ("wine cheese beef pork lamb chicken salmon tuna shrimp rice wheat corn barley oats soybeans sugar "
          "coffee tea cocoa cotton wool silk leather timber lumber steel iron copper aluminum zinc nickel "
          "tin gold silver oil gasoline coal cars trucks tractors tires shoes textiles furniture toys "
          "computers chips phones televisions cameras watches jewelry glass cement fertilizer chemicals "
          "plastics rubber medicines beer whiskey vodka olives oranges apples bananas grapes potatoes "
          "tomatoes onions peanuts almonds honey butter milk eggs flour pasta noodles chocolate tobacco "
          "cigars machinery engines turbines ships aircraft bicycles motorcycles boots carpets rugs "
          "porcelain pottery perfume cosmetics soap salt spices pepper vanilla cinnamon walnuts lemons "
          "peaches cherries melons mangoes avocados lobster oysters sardines").split()
