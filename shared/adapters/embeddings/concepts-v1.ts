/**
 * Concept lexicon v1 of the local embedder: hand-written groups of words and phrases that mean
 * the same thing for routing work (business, software, writing, research, travel, legal, finance,
 * support, operations, marketing, people, security, design). A text that uses any term of a group
 * gets that group's concept feature and the features of its broader parents (the `dom.*` domains),
 * so "work out why revenue dipped" meets "statistics, trends, dashboards" without sharing a word.
 *
 * Line format:   id[*weight] [> parent parent ...]: term, term, multi word term, ...
 * Terms are matched after the same tokenising and stemming as the text (so "invoices" matches
 * "invoice"); multi-word terms match consecutive words and hide the single-word terms inside them.
 * Changing this file changes every vector: bump the version in the embedder id when you do.
 */
export const CONCEPTS_V1 = `
# ---- research -------------------------------------------------------------------------------
res.research > dom.research: research, researcher, researching, investigate, investigation, look into, looking into, find out, dig into, explore the topic, inquiry, enquiry, study the question, background research, desk research
res.source > dom.research: source, sources, sourced, reference, references, reference list, citation, citations, cite, cited, citing, bibliography, footnote, footnotes, link to, links, with links, came from, original source, primary source, primary sources, secondary sources, attribution of claims
res.publication > dom.research: paper, papers, study, studies, journal, journals, publication, publications, published, whitepaper, white paper, preprint, academic, peer-reviewed, scholarly, thesis, report by, official reports, meta-analysis
res.evidence > dom.research: evidence, findings, finding, proof, credible, credibility, corroborate, corroborated, claim, claims, unsupported, disputed, conflicting evidence, disagree, consensus, what is known, what we know, state of knowledge
res.factcheck > dom.research: fact-check, fact check, fact checking, fact-checking, verify the claims, debunk, confirmed or wrong, check the facts
res.literature > dom.research: literature, literature review, state of the art, prior work, body of work, survey of, systematic review, what studies say, what published
res.market > dom.research dom.marketing: competitor, competitors, competition, competitive, competitive landscape, rivals, rival, other companies, other vendors, alternatives to, market share, who else, players in, landscape, vendors compared, market research, market size
res.synthesis > dom.research: synthesise, synthesize, synthesis, overview, summary of findings, brief, briefing, background, background brief, explainer, primer, due diligence, what they charge, how they compare
gen.compare*0.5: compare, comparing, comparison, comparisons, versus, pros and cons, trade-off, trade-offs, side by side, benchmark, contrast, differences between

# ---- writing --------------------------------------------------------------------------------
wri.write > dom.writing: write, writing, written, writer, author, compose, draft a, drafting, redraft, ghostwrite, put into words, write up, write-up
wri.edit > dom.writing: edit, editing, edited, editor, copy edit, copyedit, copy editing, copy-edit, revise, revision, rewrite, rewriting, reword, rephrase, polish, tighten, tighten the wording, shorten, shorter, trim, cut down, condense, concise, wordy, make it shorter, half the length, easier to follow, reads smoothly, half its length, in half, cut it down, length, make it crisp, crisp, punchy
wri.proof > dom.writing: proofread, proofreading, proof-read, typo, typos, grammar, grammatical, spelling, punctuation, spelling mistakes, no mistakes
wri.prose > dom.writing: prose, text, texts, copy, wording, words, word, sentence, sentences, paragraph, paragraphs, passage, passages, word count, 900-word, headline, headlines, bullet points, bullet-point, notes into
wri.genre > dom.writing: article, articles, blog, blog post, blog posts, essay, letter, letters, memo, memos, press release, op-ed, story, stories, speech, abstract, update to, documentation, docs page, guide, manual, handbook text, annual letter, report text, white paper draft, announcement, case study, product page copy
wri.tone > dom.writing: tone, voice, style, style guide, house style, friendly, formal, informal, confident, engaging, readable, easy to read, plain language, plain english, active voice, flow, reads well, warm, personal, consistent tone, clarity, livelier, lively
wri.summary > dom.writing: summarise, summarize, summary, summaries, recap, digest, gist, minutes, meeting notes, notes, turn notes, turn the notes, paragraphs for
wri.audience > dom.writing dom.marketing: audience, readers, reader, read by, for everyone who, who missed it

# ---- data and analytics ---------------------------------------------------------------------
dat.data > dom.data: data, dataset, datasets, database, data warehouse, warehouse, rows, columns, records, raw data, raw counts, data quality, clean the data, missing values, duplicated rows, csv file
dat.analyse > dom.data: analyse, analyze, analysis, analyses, analytics, analytical, drill down, dig into the numbers, break down, breakdown, slice, segment, segments, segmentation, by country, by region, per store, broken down, broken down by, by month, by team, per team, per month, month by month, by channel, per channel
dat.stats > dom.data: statistics, statistical, statistically, significant, significance, p-value, regression, correlation, correlate, correlated, variance, variation, distribution, mean, median, average, standard deviation, confidence interval, hypothesis, real or chance, by chance, chance, random noise, effect size, size of the effect, accounts for, explains it, sample size
dat.viz > dom.data: chart, charts, graph, graphs, plot, plots, visualise, visualize, visualisation, visualization, dashboard, dashboards, histogram, heatmap, curve, curves, trend chart, retention curves, table of results
dat.spreadsheet > dom.data: spreadsheet, spreadsheets, excel, google sheets, pivot table, pivot, formula, formulas, vlookup
dat.sql > dom.data: sql, query, queries, select statement, bigquery, snowflake, redshift, athena, looker, tableau, power bi, metabase
dat.metric > dom.data: metric, metrics, kpi, kpis, measure, measured, measurement, numbers, figures, counts, count, rate, rates, percentage, percentages, ratio, active users, weekly active, daily active, monthly active, retention, churn, churned, revenue, sales, sold, sell, sells, best-selling, engagement, usage, traffic, volume, time it takes, how long it takes, response time, response times, average time, monthly recurring revenue, mrr, arr
dat.trend > dom.data: trend, trends, trending, over time, dip, dipped, dips, drop, dropped, decline, declined, declining, fell, fall, falling, rise, rose, rising, increase, increased, decrease, decreased, spike, spiked, grew, month over month, year over year, week over week, seasonality, seasonal, getting worse, getting better, compare periods, getting longer, getting slower, getting faster, over the past year, over the last year, past year, has been getting
dat.forecast > dom.data: forecast, forecasting, forecasts, predict, prediction, predictions, projection, projections, extrapolate, model the, time series
dat.experiment > dom.data: a/b test, a b test, ab test, a/b tests, experiment, experiments, split test, control group, variant, variants, before and after, than before, uplift, lift, impact of, did it help, whether more people, effect of
dat.cohort > dom.data: cohort, cohorts, cohort analysis, funnel, funnels, funnel analysis, drop-off, signup month, lifecycle
dat.why > dom.data: why, work out why, figure out why, explain why, what caused, causes, cause, drivers, driver, reason for, reasons for, what explains, attribute to
dat.rank > dom.data: rank, ranked, ranking, which of our, top performing, best performing, worst performing, the most, the least, most in

# ---- software engineering -------------------------------------------------------------------
sw.code > dom.software: code, coding, codebase, source code, program, programs, programming, programmer, dev team, software, software engineer, software engineering, app code, module, modules, function, functions, class, classes, method, library, libraries, package, packages, repository, repo, monorepo
sw.implement > dom.software: implement, implementation, implementing, develop, add support for, feature, features, new feature, integrate, integration, integrations, connect to, connect our, hook up, wire up, sdk, build a feature, build the feature, ship the feature
sw.bug > dom.software: bug, bugs, buggy, crash, crashes, crashing, crashed, exception, exceptions, stack trace, regression, defect, defects, fix the bug, bug fix, bug fixes, broken build, failing test, does not work, doesn't work, not working
sw.fix > dom.software dom.support: fix, fixes, fixing, fixed, resolve, patch up, workaround
sw.test > dom.software: unit test, unit tests, integration test, integration tests, test suite, tests pass, regression test, end-to-end test, e2e, tdd, test-driven, mocks, fixtures
gen.test*0.4: test, tests, testing, tested, tester, testers
sw.build > dom.software: build, builds, compile, compiles, compiler, compiled, type check, type-check, lint, linter, the build, build passes, green build, build is green, continuous integration
sw.refactor > dom.software: refactor, refactoring, refactored, clean up the code, tech debt, technical debt, restructure, rename, dead code, simplify the code
sw.api > dom.software: api, apis, rest api, graphql, endpoint, endpoints, http, webhook, webhooks, client library, api client, oauth, single sign-on, sso, login, log in, token, tokens, session, sessions, json, rpc, grpc, sign in, sign-in, signing in, sign into the app, social login, google login, single sign on, existing accounts, accounts that already exist, authentication, auth
sw.language > dom.software: typescript, javascript, python, golang, java, rust, node, nodejs, node.js, react, vue, angular, css, html, kotlin, swift, ruby, rails, django, php, c#, .net, frontend, front-end, front end, backend, back-end, back end, full-stack, web app, mobile app, ios, android
sw.migrate > dom.software: migrate, migration, migrations, migrating, upgrade the library, upgrade dependencies, dependency, dependencies, orm, framework, frameworks, version 5, deprecated, port to, rewrite in
sw.script > dom.software: script, scripts, scripting, cron, cron job, scheduled job, nightly job, background job, batch job, program that, small program, command line, cli, automate a task, every night
sw.file > dom.software: file, files, upload, uploads, uploaded, download, storage bucket, s3 bucket, delete files, older than, export, exports, import, csv export, pdf export
sw.payment > dom.software: stripe, payment gateway, payment provider, paypal, adyen, braintree, card payments, pay by card, checkout integration, declined payments, declines
sw.ui > dom.software dom.design: button, buttons, form, forms, page, pages, login page, settings page, reports page, component, components, screen, modal, checkout page

# ---- code review ----------------------------------------------------------------------------
gen.review*0.6: review, reviews, reviewed, reviewing, reviewer, reviewers, look over, go through, read through, check over, second opinion, sanity check, sanity-check, assess, assessed, critique, inspect
rev.change > dom.review dom.software: code review, code reviews, pull request, pull requests, merge request, merge requests, diff, diffs, patch, patches, changeset, commit, commits, proposed change, proposed changes, teammate's change, colleague's change, contribution, contributions, change to the, changes the, before it goes in, before merging, before merge, land, to land, merged, merge, merging, branch
rev.verdict > dom.review: approve, approved, approval, request changes, requested changes, lgtm, sign off, verdict, accept the change, good enough, blocking, blocker, nit, nits, safe to ship, safe to merge, ready to merge
rev.feedback > dom.review: feedback, comment, comments, commented, comment on, point out, flag, flagged, line by line, line references, file and line, tied to a line, suggestions, suggested changes, actionable
rev.quality > dom.review: readability, unclear naming, edge cases, edge case, error handling, maintainability, code smell, smells, could break, breakage, breakages, risky change, risky changes, logic errors, off-by-one, test coverage, coverage

# ---- travel ---------------------------------------------------------------------------------
trv.trip > dom.travel: travel, travels, travelling, traveling, traveller, travellers, traveler, travelers, trip, trips, journey, journeys, visit, visiting, get there, getting there, fly to, business trip, offsite, team offsite, holiday, holidays, vacation, getaway, tour, touring, sightseeing, week in, weekend in, abroad trip, be in, back by
trv.transport > dom.travel: flight, flights, fly, flying, airline, airlines, airport, airports, train, trains, rail, railway, bus, coach, ferry, car hire, car rental, rental car, taxi, taxis, layover, connection, connections, direct flight, economy class, business class, plane, plane ticket, train ticket, boarding
trv.stay > dom.travel: hotel, hotels, accommodation, accommodations, somewhere to stay, where to stay, where to sleep, place to stay, lodging, airbnb, room, rooms, nights, night stay, check-in, hostel, resort, guesthouse, near the venue
trv.itinerary > dom.travel: itinerary, itineraries, day-by-day, day by day, each day, where to go, route, routes, sightseeing plan, two-day itinerary, daily plan
trv.booking > dom.travel: book, booking, bookings, booked, reserve, reservation, reservations, rebook, cancellation terms, fares, fare
trv.visa > dom.travel: visa, visas, passport, passports, entry requirements, entry rules, border, immigration, esta, work permit, travel document
trv.event > dom.travel: conference, conferences, expo, trade show, venue, event venue, meetup, kick-off
trv.leisure > dom.travel: family, kids, children, young children, beach, museum, museums, attractions, leisure, tourist, tourism, honeymoon
trv.city > dom.travel: berlin, paris, london, tokyo, new york, san francisco, amsterdam, madrid, barcelona, rome, milan, munich, vienna, prague, dublin, lisbon, porto, zurich, geneva, brussels, copenhagen, stockholm, oslo, helsinki, warsaw, budapest, athens, istanbul, dubai, singapore, hong kong, seoul, shanghai, beijing, sydney, melbourne, toronto, vancouver, montreal, chicago, boston, seattle, austin, miami, los angeles, mexico city, sao paulo, rio, buenos aires, cape town, nairobi, mumbai, delhi, bangalore, bangkok, jakarta, osaka, kyoto
geo.country*0.4: portugal, spain, france, germany, italy, japan, india, china, brazil, usa, united states, canada, mexico, uk, united kingdom, ireland, netherlands, belgium, switzerland, austria, poland, greece, turkey, australia, singapore, thailand, vietnam, indonesia, korea, europe, asia, africa, america, countries, country, abroad, overseas, international

# ---- legal and contracts --------------------------------------------------------------------
leg.contract > dom.legal: contract, contracts, contractual, agreement, agreements, msa, master service agreement, master services agreement, sow, statement of work, signed deal, the deal, signature, terms and conditions, terms of service, tos, amendment, addendum, renewal, counterparty, signed contract, signed agreement, sign the contract, sign the agreement, countersign
leg.clause > dom.legal: clause, clauses, provision, provisions, indemnity, indemnities, indemnification, liability, liabilities, limitation of liability, warranty, warranties, termination, terminate, governing law, jurisdiction, confidentiality, non-compete, exclusivity, force majeure, remedies, remedy, damages, penalty, penalties, redline, redlines, permitted use, duration of
leg.nda > dom.legal: nda, ndas, non-disclosure, non-disclosure agreement, confidentiality agreement, mutual nda
leg.law > dom.legal: law, laws, legal, legally, lawful, unlawful, illegal, allowed to, are we allowed, we are allowed, may we, permitted, prohibited, statute, court, courts, sue, sued, lawsuit, litigation, liable, rights, counsel, lawyer, lawyers, attorney, solicitor, legal advice, the rule, which rule, rules say, allow us to, allows us to, are we permitted
leg.regulation > dom.legal: regulation, regulations, regulatory, regulator, compliance, compliant, comply, complying, gdpr, ccpa, hipaa, data protection, privacy, privacy policy, personal data, consent, retention period, keep indefinitely, indefinitely, right to be forgotten, data subject, dpa, lawful basis
leg.ip > dom.legal: intellectual property, copyright, copyrighted, trademark, trademarks, patent, patents, licence, licences, license, licenses, licensing, licensed, gpl, agpl, mit license, apache license, copyleft, royalty, royalties, fair use, without permission, found online, without asking, can we use, may we use, allowed to use, rights to use, usage rights, stock photo, image rights
leg.obligation > dom.legal: obligation, obligations, owe them, what we owe, duties, duty, what we must do, must we, entitled to, binding
leg.dispute > dom.legal: dispute, disputes, walk away, walks away, stops delivering, stop delivering, breach of contract, non-performance, default on, notice period, exit clause, options and remedies, claim against
leg.parties > dom.legal: party, parties, supplier, suppliers, partner, partners, merger, m&a, subsidiary, legal entity, counterparties, acquisition target, acquisition talks, acquisition partner

# ---- finance and accounting -----------------------------------------------------------------
fin.accounting > dom.finance: accounting, bookkeeping, bookkeeper, books, keep the books, ledger, ledgers, general ledger, journal entry, journal entries, entries, chart of accounts, accrual, accruals, accrue, debit, debits, double-entry, gaap, ifrs, accounting standards, cost centre, cost center
fin.invoice > dom.finance: invoice, invoices, invoicing, invoiced, billing, billed, overdue, unpaid, late payment, dunning, receivable, receivables, accounts receivable, payable, payables, accounts payable, statement of account, collect payment, payment reminder, reminders to pay, chase payment, owe, owes, owed, amount owed, has not paid, not paid, paid us, pay us, get paid, late fees, late fee, outstanding balance, payment terms, statement, statements
fin.expense > dom.finance: expense, expenses, expense claim, expense claims, expense report, reimburse, reimbursed, reimbursement, reimbursements, receipt, receipts, out of pocket, pay back, paid back, repaid, repay, per diem, petty cash, corporate card
fin.budget > dom.finance: budget, budgets, budgeting, budgeted, spend plan, allocate, allocation, set aside, runway, burn rate, cash flow, cash-flow, cash, funding round, fundraising, financing, financial plan, financial planning, headcount plan, money for, how much money, running short, afford
fin.tax > dom.finance: tax, taxes, taxation, vat, vat return, sales tax, gst, tax return, tax returns, tax filing, filings, irs, hmrc, tax authority, deductible, withholding, entity, german entity, fiscal
fin.statements > dom.finance: profit and loss, p&l, income statement, balance sheet, balance sheets, financial statements, financial statement, month-end, month-end close, year-end, close the books, audit, audits, auditor, auditors, revenue recognition, reconcile, reconciled, reconciliation, reconciliations, bank statement, bank statements, bank account, bank, ledger balances, balances
fin.payroll > dom.finance dom.hr: payroll, wages, payslip, payslips, bonus, bonuses, pay run
fin.finance > dom.finance: finance, financial, finances, cfo, treasury, fiscal year, quarter close, shareholders, investors, investor, equity, valuation
gen.money*0.5: money, cost, costs, price, prices, pricing, fee, fees, charge, charges, charged, charging, spend, spending, spent, cheap, cheapest, expensive, affordable, amount, amounts, dollars, euros, pounds, paid, pay, pays, payment, payments, purchase, purchases, bought

# ---- customer support -----------------------------------------------------------------------
sup.customer*0.5 > dom.support: customer, customers, customer's, user says, a user, users report, buyer, buyers, shopper, shoppers, subscriber, subscribers, account holder, end user, end users, caller, someone using, reports that
sup.ticket > dom.support: ticket, tickets, support ticket, support tickets, case, cases, help desk, helpdesk, zendesk, intercom, freshdesk, support inbox, support queue, live chat, chat, support request, support requests, support team
sup.complaint > dom.support: complaint, complaints, complain, complained, complaining, angry, furious, upset, frustrated, unhappy, dissatisfied, annoyed, irate, late delivery, arrived late, never arrives, never arrived, missing order, damaged, make it right, apologise, apologize, apology, calm, calmed, compensated
sup.respond > dom.support: reply, replies, replied, respond, respond to, response, responses, get back to, write back, courteous, politely, polite, reply to
sup.troubleshoot > dom.support: troubleshoot, troubleshooting, walk them through, walk through, step by step, reset, password reset, reset email, clear cache, reinstall, can't log in, cannot log in, cannot sign in, locked out, getting back in, sign in again, not loading, usual fixes, the usual fixes, basic troubleshooting, get the details, does nothing
sup.refund > dom.support: refund, refunds, refunded, refunding, credit, credits, money back, chargeback, chargebacks, return, returns, exchange, replacement, cancel subscription, charged twice, duplicate charge, double charge, duplicate payment
sup.escalate > dom.support: escalate, escalated, escalation, pass it on, pass on to, forward to engineering, file a bug, bug report, reproduction steps, steps to reproduce, reproducible, reproduce, hand it over, hand over, hand off, pass to the developers
sup.helpcenter > dom.support: help centre, help center, help-centre, help-center, faq, faqs, knowledge base, help article, help articles, common questions, self-service, canned response, macros
sup.account > dom.support: subscription, subscriptions, pricing plan, monthly plan, account settings, account change, account changes, membership, subscription plan, paid plan, free plan, annual plan, upgrade their plan, downgrade
sup.order > dom.support: order, orders, delivery, deliveries, shipping, shipment, parcel, tracking number, courier

# ---- devops and site reliability ------------------------------------------------------------
ops.infra > dom.ops: infrastructure, infra, cloud, aws, azure, gcp, google cloud, server, servers, instance, instances, ec2, lambda, vm, vms, virtual machine, network, networking, dns, load balancer, cdn, capacity, cloud resources, gateway, region, regions, data centre, data center
ops.container > dom.ops: kubernetes, k8s, cluster, clusters, container, containers, containerise, containerize, containerised, docker, dockerfile, helm, pod, pods, node pool, ecs, eks, fargate, workloads, workload
ops.deploy > dom.ops: deploy, deploys, deployed, deploying, deployment, deployments, release, releases, rollout, roll out, rollback, roll back, undo a bad release, go live, goes live, went live, ship to production, continuous delivery, continuous deployment, ci/cd, ci cd, ci, cd, pipeline, pipelines, github actions, jenkins, gitlab ci, blue-green, canary, release process
ops.monitor > dom.ops: monitoring, monitor, monitored, alert, alerts, alerting, pager, pagerduty, pages the, on-call, on call, oncall, observability, logs, logging, tracing, grafana, prometheus, cloudwatch, datadog, health check, health checks, uptime check
ops.incident > dom.ops: incident, incidents, outage, outages, downtime, went down, is down, site down, unreachable, unavailable, down for, 500 errors, what happened, postmortem, postmortems, post-mortem, root cause, rca, blameless, make sure it does not happen again, happen again, preventive actions, follow-up actions, firefighting
ops.reliability > dom.ops: reliability, reliable, reliably, availability, available, uptime, slo, slos, sla, slas, sli, error budget, latency, p99, p95, p50, performance, slow, slowness, scaling, scale, autoscaling, auto-scaling, load, throughput, high availability, redundancy, failover, disaster recovery, backup, backups, no downtime, zero downtime
ops.iac > dom.ops: infrastructure as code, terraform, cdk, cloudformation, pulumi, ansible, provisioning, provision
ops.cost > dom.ops: cloud cost, cloud costs, finops, cost optimisation, cost optimization, rightsizing, right-sizing, reserved instances, savings plan, idle resources, usage costs, cost of cloud
ops.production > dom.ops: production, prod, production environment, live site, website, site, staging, environment, environments, main branch, merge to main, services, service

# ---- marketing ------------------------------------------------------------------------------
mkt.campaign > dom.marketing: campaign, campaigns, marketing, marketer, promote, promotion, promotions, promoting, promotional, advertise, advertising, advert, adverts, ads, ad campaign, paid ads, ppc, google ads, sponsorship, event marketing, trade show, growth marketing
mkt.brand > dom.marketing: brand, branding, brand positioning, positioning, messaging, key message, tagline, taglines, slogan, slogans, catchy, memorable, pitch, short pitch, value proposition, elevator pitch, stand out, stands out, differentiate, differentiation, brand identity, unique selling point, usp
mkt.channel > dom.marketing: social media, social, social post, social posts, linkedin, twitter, instagram, tiktok, youtube, facebook, newsletter, newsletters, email marketing, email campaign, mailing list, content calendar, content marketing, content plan, content, influencer, influencers, channel, channels, community
mkt.seo > dom.marketing: seo, search engine optimisation, search engine optimization, search engine, search ranking, rank for, ranks for, ranks, keywords, keyword research, backlinks, organic traffic, organic search, google search, sem, meta tags, serp
mkt.growth*0.7 > dom.marketing: awareness, reach, demand, demand generation, leads, lead generation, sign up for, sign-ups, signups, sign up, trial, trials, free trial, acquisition, acquire customers, customer acquisition, growth, grow, conversion, conversions, conversion rate, click, clicks, ctr, landing page, landing pages, call to action, calls to action, cta, hear about us, more people to, attract, prospects, target audience, persona, personas, go-to-market, gtm, word of mouth, referral, referrals
mkt.launch > dom.marketing: launch, launches, launching, product launch, announce, announcing, announced, launch plan, release announcement, press, press coverage, media coverage, pr campaign, hype, buzz
mkt.market > dom.marketing: market, markets, target market, niche, segment of the market, small agencies, smb, smbs, enterprise customers, tier, tiers, enterprise tier, pricing tier, packaging, freemium, upsell, cross-sell

# ---- recruiting and HR ----------------------------------------------------------------------
hr.hire > dom.hr: hire, hiring, hires, hired, recruit, recruiting, recruitment, recruiter, recruiters, talent, talent acquisition, headhunt, headhunter, source candidates, sourcing candidates, fill the role, open role, open roles, opening, vacancy, vacancies, position, positions, we need another, shortlist, shortlisted, headcount, new hires, new hire
hr.candidate > dom.hr: candidate, candidates, applicant, applicants, cv, cvs, resume, resumes, portfolio, portfolios, job application, applications, screen cvs, screening, background check, who would fit, fit the team, culture fit
hr.interview > dom.hr: interview, interviews, interviewing, interviewer, interviewers, scorecard, scorecards, interview stages, interview loop, hiring panel, take-home, assessment centre
hr.offer > dom.hr: offer, offers, offer letter, salary, salaries, salary band, salary bands, pay band, compensation, equity grant, package, negotiate, counteroffer, pay rise, raise
hr.jobdesc > dom.hr: job, jobs, job description, job descriptions, jd, job ad, job advert, job posting, job post, role, roles, role description, responsibilities, requirements for the role, senior, junior, backend engineer role
hr.onboarding > dom.hr: onboarding, onboard, onboarded, new starter, new starters, new employee, new employees, first day, first week, induction, buddy, welcome pack, orientation, laptops and accounts, starting on monday, new colleague, new colleagues, joining, joiners, settle in, newcomer, newcomers, first two weeks, first month
hr.employee > dom.hr: employee, employees, employee's, staff, staff member, team member, team members, workforce, personnel, direct report, direct reports, manager, managers, team lead, line manager, people manager
hr.policy > dom.hr: hr, human resources, people team, people ops, policy, policies, handbook, employee handbook, code of conduct, employment law, employment contract, working hours, remote work, hybrid work, workplace
hr.leave > dom.hr: parental leave, maternity, maternity leave, paternity, paternity leave, sick leave, annual leave, time off, pto, holiday allowance, entitlement, benefits, pension, health insurance, perks, request leave, leave and benefits, on leave, leave policy, leave request
hr.performance > dom.hr: performance review, performance reviews, appraisal, appraisals, performance management, performance improvement plan, pip, underperforming, underperformance, missing deadlines, disengaged, disciplinary, grievance, conflict at work, promotion, promotions, career, career path, one-on-one, one-on-ones, employee relations, fair process, documented process
hr.culture > dom.hr: engagement survey, morale, employee retention, culture, wellbeing, well-being, diversity, inclusion, inclusive, dei, belonging

# ---- security -------------------------------------------------------------------------------
sec.security > dom.security: security, secure, securing, secured, infosec, cybersecurity, cyber, protect, protection, protecting, harden, hardening, lock down, lock it down, locked down, safe, unsafe
sec.threat > dom.security: threat, threats, threat model, threat modelling, threat modeling, attack, attacks, attacked, attacker, attackers, adversary, attack surface, stride, malicious, mitigation, mitigations, severity
sec.vuln > dom.security: vulnerability, vulnerabilities, vulnerable, cve, cves, exploit, exploits, exploited, patched, patching, security patch, zero-day, openssl, log4j, dependency scan, scanner, scan, scanning, sast, dast, penetration test, pen test, pentest, bug bounty, injection, sql injection, xss, csrf, ssrf
sec.access > dom.security: access control, access controls, access, permission, permissions, privilege, privileges, least privilege, least-privilege, iam, role-based, rbac, who can, who can see, who can open, who can read, sharing settings, shared drive, need to know, need it, revoke, revoked, grant access, admin rights, cut that down, only the people
sec.secret > dom.security: secret, secrets, api key, api keys, credential, credentials, password, passwords, leaked, leak, leaks, exposed, rotate, rotated, rotation, vault, kms, encryption, encrypt, encrypted, certificate, certificates, tls, ssl, mfa, 2fa, two-factor
sec.incident > dom.security: breach, breaches, data breach, intrusion, intruder, compromised, compromise, hacked, hacker, hackers, suspicious, suspicious activity, unusual login, unfamiliar, signed into, someone got in, got in, account takeover, malware, ransomware, forensics, unauthorised, unauthorized, how far it got, how far it spread, blast radius, containment, contain the damage, warn everyone, keep everyone safe
sec.phishing > dom.security: phishing, phish, spoofed, spoofing, impersonation, impersonate, impersonating, fake email, fraudulent, fraud, social engineering, ceo fraud, business email compromise, scam, scams, pretending to be, posing as, claiming to be, fake, gift cards, wire transfer request, urgent payment request
sec.compliance > dom.security: soc 2, soc2, iso 27001, pci, pci dss, security audit, security audits, security review, security reviews, pen test findings

# ---- product design -------------------------------------------------------------------------
des.design > dom.design: design, designs, designed, redesign, redesigned, redesigning, how it looks, look and feel, rework how, visual, visuals, visual design, aesthetic, aesthetics, ui, ux, user experience, user interface, interface, interaction design, product design, product designer, rethink, looks, how the page looks
des.wireframe > dom.design: wireframe, wireframes, mockup, mockups, mock-up, mock-ups, prototype, prototypes, prototyping, clickable prototype, sketch, sketches, figma, storyboard, user flow, user flows, flow, flows, sign-up flow, onboarding flow, journey map, information architecture, navigation, screens, layout, layouts, page layout, cart, checkout flow, checkout steps
des.usability > dom.design: usability, usable, easy to use, easier to use, user testing, usability test, usability testing, confusing, confused, cluttered, clutter, hard to find, intuitive, friction, stand out visually, find the key figures, main tasks, testers, key figures faster, without help, get lost, gets lost, lost, stuck, struggle, struggling, finish easily, give up, abandon, abandoned
des.visual > dom.design: typography, font, fonts, colour, colours, color, colors, palette, contrast, icon, icons, iconography, illustration, illustrations, spacing, grid, whitespace, design system, design systems, components library, brand guidelines
des.accessibility > dom.design: accessibility, accessible, a11y, wcag, screen reader, screen readers, poor eyesight, low vision, visually impaired, older people, elderly, older users, older testers, colour blind, color blind, larger text, font size, contrast ratio

# ---- generic work vocabulary (no domain, low weight) ----------------------------------------
gen.plan*0.4: plan, plans, planning, planned, organise, organize, arrange, arranging, schedule, scheduling, prepare, preparing, set up, coordinate, calendar
gen.improve*0.4: improve, improvement, improvements, optimise, optimize, better, enhance, boost
gen.check*0.4: check, checks, checking, verify, verifying, confirm, validate, make sure, ensure
gen.create*0.3: create, creating, make a, produce, come up with, generate
gen.explain*0.3: explain, explanation, describe, tell us, clarify, answer the question, answer
gen.problem*0.4: problem, problems, issue, issues, risk, risks, risky, wrong, mistake, mistakes, error, errors, fail, fails, failed, failure
gen.time*0.3: week, weeks, month, months, quarter, quarterly, year, years, annual, annually, daily, nightly, overnight, last night, next year, last quarter, today, tomorrow, deadline, deadlines, date, dates, monday, tuesday, wednesday, thursday, friday, january, february, march, april, may, june, july, august, september, october, november, december, spring, summer, autumn, winter
gen.company*0.3: company, companies, business, businesses, organisation, organization, startup, startups, firm, firms, vendor, vendors, enterprise, team, teams, department, departments
gen.product*0.3: product, products, offering, tool, tools, platform, app, apps, application, applications, version
gen.role*0.3: designer, designers, developer, developers, analyst, analysts, accountant, accountants, engineer, engineers, intern, interns, manager, contractor, consultant
sw.opensource*0.6 > dom.software dom.legal: open source, open-source, closed source, closed-source, proprietary software, oss
gen.unit*0.3: sales team, sales reps, sales rep, salespeople, sales department, finance team, in finance, finance department, support team, marketing team, design team, platform team, engineering team, data team, legal team, people team, it team
`;
